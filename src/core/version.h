/*
 * version.h
 *		Which SQL versions this library serves (version.c).
 */
#ifndef HOLDCOMMIT_VERSION_H
#define HOLDCOMMIT_VERSION_H

/* Was the library loaded through shared_preload_libraries?  Set by _PG_init. */
extern bool hc_preloaded;

extern bool hc_extension_row(Oid *owner, Oid *schema, char **version);
extern void hc_require_served_sql(void);
extern bool hc_sql_at_least(const char *version);
extern void hc_require_sql_at_least(const char *version, const char *function);

#endif							/* HOLDCOMMIT_VERSION_H */
