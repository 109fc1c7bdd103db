/*
 * search_path.h
 *		The search path of a call's statements (search_path.c).
 */
#ifndef HOLDCOMMIT_SEARCH_PATH_H
#define HOLDCOMMIT_SEARCH_PATH_H

#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "parser/parse_node.h"

/*
 * Names resolve in pg_catalog, then the schema (found by OID; InvalidOid:
 * pg_catalog alone), never in pg_temp nor the caller's path, until the
 * matching pop, or until the (sub)transaction that pushed it ends on an
 * error.  Push returns what pop takes.
 */
extern int	hc_search_path_push(Oid schema);
extern void hc_search_path_pop(int pushed);

/*
 * The mark that starts the text of every statement a call runs in the
 * schema: whenever the statement is (re)analysed, hc_search_path_check
 * refuses a table it reaches outside that schema and pg_catalog.
 */
extern void hc_search_path_mark(StringInfo buf, Oid schema);
extern void hc_search_path_check(ParseState *pstate, Query *query);

#endif							/* HOLDCOMMIT_SEARCH_PATH_H */
