/*
 * store_pg.h - the PostgreSQL store (store.h's interface, for -o postgresql://... and
 * postgres://...: any libpq URI). Schema and its meaning: store_pg.c. One owner thread at a time.
 */
#ifndef VIDFEAT_STORE_PG_H
#define VIDFEAT_STORE_PG_H

#include "store/store.h"

/* The PostgreSQL kind of store: claims postgresql:// and postgres:// URIs. */
extern const vf_store_ops vfi_store_pg;

#endif /* VIDFEAT_STORE_PG_H */
