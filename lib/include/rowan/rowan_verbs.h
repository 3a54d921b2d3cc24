/*
 * librowan: applying WAN-sized RC QP attributes (rowan_qp_attrs, from
 * <rowan/rowan.h>) through libibverbs and librdmacm. Needs rdma-core's
 * headers; link with -lrowan (pkg-config rowan), which links libibverbs and
 * librdmacm.
 *
 * A QP's WAN-relevant attributes can only be set on its way up: path MTU,
 * responder resources and the RNR timer on INIT->RTR, the ACK timeout,
 * retries and READ depth on RTR->RTS; queue depths at creation.
 */
#ifndef ROWAN_ROWAN_VERBS_H
#define ROWAN_ROWAN_VERBS_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rowan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps `attrs` to what the device offers (max_qp_rd_atom,
 * max_qp_init_rd_atom, max_qp_wr, active MTU of `port_num`), in place.
 * ROWAN_ERR_SYSTEM when the device cannot be queried. */
ROWAN_API int rowan_qp_attrs_clamp(struct ibv_context* ctx, uint8_t port_num,
                                   rowan_qp_attrs* attrs);

/* Sets cap.max_send_wr / cap.max_recv_wr of a QP about to be created. */
ROWAN_API void rowan_qp_init_attr_apply(const rowan_qp_attrs* attrs, struct ibv_qp_init_attr* init);

/* Adds the WAN attributes for the transition to `state` (IBV_QPS_RTR or
 * IBV_QPS_RTS) to `attr` and their flags to `*mask`; the caller fills the
 * rest (dest QPN, PSNs, address vector) and calls ibv_modify_qp.
 * ROWAN_ERR_INVALID for another state. */
ROWAN_API int rowan_qp_attrs_to_ibv(const rowan_qp_attrs* attrs, enum ibv_qp_state state,
                                    struct ibv_qp_attr* attr, int* mask);

/* ibv_modify_qp to `state` with the caller's `attr`/`mask` plus the WAN
 * attributes. ROWAN_ERR_SYSTEM (errno in rowan_last_error) on failure. */
ROWAN_API int rowan_qp_modify(struct ibv_qp* qp, const rowan_qp_attrs* attrs,
                              enum ibv_qp_state state, struct ibv_qp_attr* attr, int mask);

/* For rdma_cm users: sets the ACK timeout on `id` (RDMA_OPTION_ID_ACK_TIMEOUT,
 * call after address resolution and before rdma_connect/rdma_accept) and fills
 * retry_count, rnr_retry_count, responder_resources and initiator_depth of
 * `param`. */
ROWAN_API int rowan_cm_apply(struct rdma_cm_id* id, const rowan_qp_attrs* attrs,
                             struct rdma_conn_param* param);

#ifdef __cplusplus
}
#endif

#endif /* ROWAN_ROWAN_VERBS_H */
