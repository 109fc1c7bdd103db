/*
 * home_part.h
 *		The part a backend tries first for a product of several parts
 *		(home_part.c).
 */
#ifndef HOLDCOMMIT_HOME_PART_H
#define HOLDCOMMIT_HOME_PART_H

extern bool home_part_get(const char *product_id, int16 *part);
extern void home_part_set(const char *product_id, int16 part);
extern void home_part_forget(const char *product_id);

#endif							/* HOLDCOMMIT_HOME_PART_H */
