/*
 * register.h
 *		What holdcommit.c's ProcessUtility_hook tells the fenced writes
 *		(fence.c): a PREPARE TRANSACTION under way, whose gid says whether
 *		the deployment's own two-phase commit prepares it.  Only
 *		holdcommit.c and fence.c include it.
 */
#ifndef HOLDCOMMIT_LEASE_REGISTER_H
#define HOLDCOMMIT_LEASE_REGISTER_H

extern void hc_fence_prepare_named(const char *gid);

#endif							/* HOLDCOMMIT_LEASE_REGISTER_H */
