#include "../../include/rowan/rowan_verbs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace {
uint32_t mtu_bytes(ibv_mtu m) { return 128U << static_cast<int>(m); }
}  // namespace

extern "C" {

int rowan_qp_attrs_clamp(ibv_context* ctx, uint8_t port_num, rowan_qp_attrs* attrs) {
  if (ctx == nullptr || attrs == nullptr) return ROWAN_ERR_INVALID;
  ibv_device_attr dev{};
  if (ibv_query_device(ctx, &dev) != 0) return ROWAN_ERR_SYSTEM;
  ibv_port_attr port{};
  if (ibv_query_port(ctx, port_num, &port) != 0) return ROWAN_ERR_SYSTEM;
  attrs->max_rd_atomic = static_cast<uint8_t>(
      std::min<int>(attrs->max_rd_atomic, std::max(dev.max_qp_init_rd_atom, 1)));
  attrs->max_dest_rd_atomic = static_cast<uint8_t>(
      std::min<int>(attrs->max_dest_rd_atomic, std::max(dev.max_qp_rd_atom, 1)));
  const auto max_wr = static_cast<uint32_t>(std::max(dev.max_qp_wr, 1));
  attrs->max_send_wr = std::min(attrs->max_send_wr, max_wr);
  attrs->max_recv_wr = std::min(attrs->max_recv_wr, max_wr);
  if (port.active_mtu != 0 && attrs->path_mtu > static_cast<uint8_t>(port.active_mtu)) {
    attrs->path_mtu = static_cast<uint8_t>(port.active_mtu);
    attrs->path_mtu_bytes = mtu_bytes(port.active_mtu);
  }
  return ROWAN_OK;
}

void rowan_qp_init_attr_apply(const rowan_qp_attrs* attrs, ibv_qp_init_attr* init) {
  if (attrs == nullptr || init == nullptr) return;
  init->cap.max_send_wr = attrs->max_send_wr;
  init->cap.max_recv_wr = attrs->max_recv_wr;
}

int rowan_qp_attrs_to_ibv(const rowan_qp_attrs* attrs, ibv_qp_state state, ibv_qp_attr* attr,
                          int* mask) {
  if (attrs == nullptr || attr == nullptr || mask == nullptr) return ROWAN_ERR_INVALID;
  if (state == IBV_QPS_RTR) {
    attr->path_mtu = static_cast<ibv_mtu>(attrs->path_mtu);
    attr->max_dest_rd_atomic = attrs->max_dest_rd_atomic;
    attr->min_rnr_timer = attrs->min_rnr_timer;
    *mask |= IBV_QP_PATH_MTU | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    return ROWAN_OK;
  }
  if (state == IBV_QPS_RTS) {
    attr->timeout = attrs->timeout;
    attr->retry_cnt = attrs->retry_cnt;
    attr->rnr_retry = attrs->rnr_retry;
    attr->max_rd_atomic = attrs->max_rd_atomic;
    *mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    return ROWAN_OK;
  }
  return ROWAN_ERR_INVALID;
}

int rowan_qp_modify(ibv_qp* qp, const rowan_qp_attrs* attrs, ibv_qp_state state, ibv_qp_attr* attr,
                    int mask) {
  if (qp == nullptr || attr == nullptr) return ROWAN_ERR_INVALID;
  const int rc = rowan_qp_attrs_to_ibv(attrs, state, attr, &mask);
  if (rc != ROWAN_OK) return rc;
  attr->qp_state = state;
  mask |= IBV_QP_STATE;
  if (ibv_modify_qp(qp, attr, mask) != 0) return ROWAN_ERR_SYSTEM;
  return ROWAN_OK;
}

int rowan_cm_apply(rdma_cm_id* id, const rowan_qp_attrs* attrs, rdma_conn_param* param) {
  if (attrs == nullptr || param == nullptr) return ROWAN_ERR_INVALID;
  param->retry_count = attrs->retry_cnt;
  param->rnr_retry_count = attrs->rnr_retry;
  param->responder_resources = attrs->max_dest_rd_atomic;
  param->initiator_depth = attrs->max_rd_atomic;
  if (id != nullptr) {
    uint8_t timeout = attrs->timeout;
    if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof timeout) !=
        0)
      return ROWAN_ERR_SYSTEM;
  }
  return ROWAN_OK;
}

}  // extern "C"
