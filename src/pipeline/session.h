/*
 * session.h - a database held open for many searches (vidfeat serve): the model row its vectors
 * are, the search index that covers them and the CLIP text tower that pairs with them, each
 * made once, then shared by every query. vf_db_similar is one such session for one query.
 *
 * Any thread may query a session at once (the index and the text tower are used by one at a
 * time, under the session's locks; each query reads the database through a read-only
 * connection of its own, taken from the few the session keeps, so a run writing to it meanwhile
 * is never blocked, and each query sees what was committed before it). The index is looked for
 * again, at most every few seconds, when its file changed or none was found, so that one built
 * or brought up to date while the session is open is used.
 */
#ifndef VIDFEAT_SESSION_H
#define VIDFEAT_SESSION_H

#include "vidfeat.h"
#include "core/status.h"
#include "pipeline/held.h"
#include "store/store.h"

typedef struct vfi_session vfi_session;

/* Open db (read-only) for searches of the model row cfg chooses (cfg->model, cfg->layer: as
 * vf_db_similar's; sound_only: among audio models' rows, as vf_similar_query.sound; cfg is
 * copied, its strings too); index: the index file to use (NULL: the one the database records,
 * where it is on this machine). The database's errors (VF_ERR_STORE). */
vf_status vfi_session_open(const char *db, const vf_config *cfg, int sound_only, const char *index,
                           vfi_session **out, vf_err *err);
/* The model row searched, and the configuration (its strings the session's): borrowed. */
const vfi_held_model *vfi_session_row(const vfi_session *s);
const vf_config *vfi_session_config(const vfi_session *s);
/* vf_db_similar's query on the session (q->index is the session's; q->exact, q->probe, q->k as
 * there): the hits through hit, best first, and where the query came from into *src (may be
 * NULL). stored_only: a video must be one the database holds vectors of (VF_ERR_STORE if not),
 * never a file read now. Statuses as vf_db_similar's. */
vf_status vfi_session_similar(vfi_session *s, const vf_similar_query *q, int stored_only,
                              void (*hit)(void *user, const vf_neighbour *n), void *user,
                              vf_neighbour *src, vf_err *err);
/* Does the database hold vectors of the session's row for the file stored as path (that name:
 * one indexed look-up, whatever the archive's size, the file system not asked)? *found, and the
 * one nearest t into *ref. */
vf_status vfi_session_stored(vfi_session *s, const char *path, double t, vf_store_ref *ref,
                             int *found, vf_err *err);
void vfi_session_free(vfi_session **ps);

#endif /* VIDFEAT_SESSION_H */
