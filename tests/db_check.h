/*
 * db_check.h - for tests that look into a vidfeat database: one integer from a query, read-only,
 * failing the test (check.h) on any SQLite error.
 */
#ifndef VIDFEAT_DB_CHECK_H
#define VIDFEAT_DB_CHECK_H

#include <sqlite3.h>

#include "check.h"

static inline long long vf_db_int(const char *db, const char *sql)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    CHECK(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    CHECK_MSG(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(h));
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

#endif /* VIDFEAT_DB_CHECK_H */
