/*
 * client_entry.h: requests that name a region's doorbell entry
 * (fprep_region_request; client_doorbell.c), and telling a region
 * registered on a connection that has since closed (client_conn.c), for
 * the regions and the Python extension (internal).
 */
#ifndef FPREP_CLIENT_ENTRY_H
#define FPREP_CLIENT_ENTRY_H

#include <stdint.h>

#include "frameprep/frameprep.h"

/* fprep__client_conn_lost returns how many connections c has lost so far
 * (the daemon died or restarted): a region registered while it said n is
 * unknown to the daemon once it says more. Any thread. */
uint64_t fprep__client_conn_lost(fprep_client *c);

/* fprep__client_call_entry sends req (a FRAME or ECHO whose frame and
 * tensor are in regions) through entry k of the doorbell area db when the
 * daemon watches it, else through nng (its reply in shared memory if
 * req->shm_reply), and stores the checked reply in *res, as
 * fprep_client_request does. db NULL, or inline input or output: through
 * nng. lost is c's fprep__client_conn_lost when the area was registered:
 * a wait in the entry ends with FPREP_ETRANSPORT once a connection is
 * lost after that. FPREP_ETIMEDOUT after the daemon took the request
 * and never answered: the caller stops using the area. The caller holds
 * entry k alone. */
int fprep__client_call_entry(fprep_client *c, uint8_t *db, unsigned k,
                             uint64_t lost, fprep_request *req,
                             fprep_result *res);

#endif /* FPREP_CLIENT_ENTRY_H */
