/*
 * register.h
 *		The scale-out layer's registration (register.c): only holdcommit.c
 *		includes it.
 */
#ifndef HOLDCOMMIT_SCALEOUT_REGISTER_H
#define HOLDCOMMIT_SCALEOUT_REGISTER_H

extern void hc_scaleout_register(void);

#endif							/* HOLDCOMMIT_SCALEOUT_REGISTER_H */
