// The gateway's packet engine (passthrough mode, ARCHITECTURE.md "Modes of a
// route"): IP packets that hosts send to a remote prefix are classified into
// flows, framed as records on the flow's transport stream to the peer gateway,
// and the peer's records are delivered to local hosts.
//
//   local port ──rx──▶ ARP / classify ──▶ flow stream ──▶ transport ──▶ WAN link
//   local port ◀──tx── neighbour lookup ◀── records ◀── transport ◀── WAN link
//
// Record framing on a stream: u16 length (big-endian) | IP packet. A stream
// carries one flow's packets in order; a local MTU larger than the WAN's is
// handled by the stream (records span datagrams and are reassembled).
//
// A Worker is one packet worker (ARCHITECTURE.md "Packet workers"): it
// owns a shard of the flows (flow table, split state), its own connection to
// each peer (worker i binds the link's port + i and talks to the peer's port
// + i, so worker i of one gateway pairs with worker i of the other) and its
// neighbour table. site.h runs one per lcore; shard.h says which frames are
// whose.
//
// Threading: poll(), reload() and publish() run on the worker's lcore; the
// snapshot accessors run on the control thread and only read the snapshot
// that publish() copies under a mutex (about ten times a second, and once
// more on a control request — never per packet).
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "config/config.h"
#include "crypto/secure_io.h"
#include "datapath/busy_meter.h"
#include "datapath/datapath_metrics.h"
#include "datapath/dpdk_port.h"
#include "datapath/dpdk_wan_io.h"
#include "datapath/flow_table.h"
#include "datapath/peer_events.h"
#include "datapath/peer_health.h"
#include "datapath/send_admission.h"
#include "datapath/site_io.h"
#include "datapath/wan_link_mux.h"
#include "io/udp_uring.h"
#include "net/vlan.h"
#include "split/split_engine.h"
#include "transport/connection.h"
#include "transport/driver.h"

namespace rowan::gw {

using Mac = std::array<uint8_t, 6>;

/// Why a packet was dropped (VPP tcp_error.def style); names in kDropNames.
enum class Drop : uint8_t {
  kRuntFrame,      ///< shorter than an Ethernet header
  kNotForUs,       ///< unicast to another MAC
  kUnsupportedL2,  ///< an unknown ethertype (or a group address not served)
  kMalformedIp,    ///< bad version, header or lengths
  kMalformedArp,
  kToGateway,      ///< addressed to the gateway itself (not served)
  kNoRoute,        ///< no [[route]] covers the destination
  kOversize,       ///< larger than [local] mtu
  kMalformedRoce,  ///< UDP/4791 too short for a BTH (other parse failures are carried)
  kFlowTableFull,
  kBacklog,          ///< the peer's send buffer is full
  kPeerDown,         ///< no transport to the route's peer
  kBadRecord,        ///< a record from the peer that is not a sane IP packet
  kNotLocal,         ///< a delivered packet whose destination is not on the site subnet
  kNeighborPending,  ///< the host's MAC is unresolved (no answer yet, queue full, or none came)
  kNoMbuf,
  kLocalTxFull,
  kWorkerBusy,     ///< the distributor found this worker's RX ring full (distributor.h)
  kVlanStacked,    ///< two 802.1Q tags, or an 802.1ad (QinQ) service tag (vlan.h)
  kVlanTruncated,  ///< an 802.1Q tag cut short
  kCount
};
extern const char* const kDropNames[];

/// Neighbour (ARP) table for the site subnet; fixed size.
class NeighborTable {
 public:
  static constexpr uint32_t kCapacity = 1024;
  static constexpr uint32_t kMaxPending = 8;
  /// An unresolved host that has not answered this long fails: its queue is
  /// dropped, and so is what comes for it until it answers (asked every
  /// kFailedAsk). Linux: 3 solicitations 1 s apart.
  static constexpr Duration kResolveTimeout = Duration::from_s(3);
  static constexpr Duration kAsk = Duration::from_ms(100);
  static constexpr Duration kFailedAsk = Duration::from_s(1);
  struct Entry {
    roce::IpAddr ip;
    Mac mac{};
    bool used = false;
    bool resolved = false;
    bool failed = false;  ///< unresolved past kResolveTimeout
    TimePoint updated;
    TimePoint last_request;
    TimePoint asked_since;  ///< the first frame queued while unresolved
    VlanTag ask;            ///< the VLAN the host is asked on
    uint32_t npending = 0;
    rte_mbuf* pending[kMaxPending]{};
    /// Records for the host wait in their streams (Worker::host_waits).
    bool full() const { return !resolved && !failed && npending >= kMaxPending; }
  };
  Entry* find(const roce::IpAddr& ip) noexcept;
  Entry* find_or_add(const roce::IpAddr& ip) noexcept;
  uint32_t size() const { return size_; }
  const std::array<Entry, kCapacity>& entries() const { return e_; }
  std::array<Entry, kCapacity>& entries() { return e_; }

 private:
  static uint32_t bucket(const roce::IpAddr& ip);
  std::array<Entry, kCapacity> e_{};
  uint32_t size_ = 0;
};

/// One path to a peer (ARCHITECTURE.md "Paths"): one of its WAN links, the
/// socket or port on it and, on encrypted links, a link-security session of
/// its own. Path i of a peer is its i-th link (PeerConfig::links), on both
/// gateways of the pair.
struct PeerPath {
  const WanLinkConfig* link = nullptr;
  SockAddr endpoint;                   ///< the peer's address on it (this worker's port)
  std::unique_ptr<io::UdpUringIo> io;  ///< backend = "udp", the link's only peer
  UdpLinkPort* shared = nullptr;       ///< backend = "udp", a link several peers share
  std::unique_ptr<DpdkWanIo> dpdk;     ///< backend = "dpdk"
  const io::PacketIo& link_io() const {
    if (io) return *io;
    if (shared != nullptr) return *shared;
    return *dpdk;
  }
  /// Encrypts the path (docs/link-security.md); null when local.insecure.
  /// The driver runs on it instead of the raw port; peer_up()/secure_stats()
  /// give the session state and last handshake.
  std::unique_ptr<crypto::SecureIo> secure;
  io::PacketIo* wan = nullptr;  ///< what the driver sends and receives on
};

/// Per peer: its paths, transport connection and receive-side record state.
struct PeerState {
  PeerConfig cfg;
  std::vector<PeerPath> paths;  ///< one at least; paths[0] is the peer's first link
  const WanLinkConfig& link() const { return *paths.front().link; }
  bool secure() const { return paths.front().secure != nullptr; }
  /// Link security over the paths (secure() only): handshakes, rekeys and
  /// drops summed, the newest handshake and receive, the most peer restarts
  /// one path saw.
  crypto::SecureStats secure_stats() const;
  /// Some path has a session to send on (`peer_up`: and heard the peer lately).
  bool has_session(TimePoint now) const;
  bool peer_up(TimePoint now) const;
  /// The peer process's incarnation when the transport was last set up (its
  /// link-security handshakes carry it; 0: not known yet).
  uint64_t incarnation = 0;
  uint64_t transport_resets = 0;  ///< transports dropped because the peer restarted
  PeerHealth health;              ///< outages of the link (housekeeping)
  PeerEvents events{""};          ///< its up/down/handshake log lines (publish)
  DrainWatch drain;               ///< whether the send buffer drains (poll)
  TimePoint last_ping;            ///< insecure links: the transport's own keepalive
  std::unique_ptr<transport::Connection> conn;
  std::unique_ptr<transport::Driver> driver;
  std::vector<io::PacketIo*> path_io;  ///< each path's `wan`, in path order (the driver's)
  struct RxStream {
    uint32_t need = 0;  ///< bytes of the record being assembled (0: reading a length)
    uint64_t packets = 0;
    uint64_t bytes = 0;
    bool parked = false;  ///< in `parked`: records left in the transport
    /// Records taken straight out of received datagrams (Worker::take_in_order):
    /// the one being filled (`filled` of `need` bytes, after the frame's
    /// Ethernet room), and whole ones waiting for delivery, oldest at
    /// ready[ready_head]. They come before anything in the transport's
    /// buffer for this stream.
    rte_mbuf* partial = nullptr;
    uint32_t filled = 0;
    std::vector<rte_mbuf*> ready;
    size_t ready_head = 0;
    bool in_direct = false;  ///< in PeerState::direct
    bool host_wait = false;  ///< in PeerState::host_wait
    size_t waiting() const { return ready.size() - ready_head; }
    /// Frees the records it holds; returns how many mbufs that was.
    uint32_t free_mbufs() noexcept;
  };
  std::vector<RxStream> rx;
  /// Streams with records in `ready` (delivered by drain_peer before it
  /// reads the transport's buffers).
  std::vector<uint64_t> direct;
  /// The worker's count of site mbufs held by records in place (partial or
  /// waiting), which this peer's streams give back when freed.
  uint32_t* direct_held = nullptr;
  /// Takes in-order stream data out of received datagrams for this worker
  /// (transport::StreamSink): one copy, into the site mbuf.
  std::unique_ptr<transport::StreamSink> sink;
  PeerState() = default;
  PeerState(const PeerState&) = delete;
  PeerState& operator=(const PeerState&) = delete;
  ~PeerState();
  /// Streams whose draining stopped because the local TX queue was full;
  /// poll resumes them once it has room (next_readable() reports a stream
  /// only when new data arrives). Capacity reserved up front (one per stream).
  std::vector<uint64_t> parked;
  /// Streams whose next record is for a host whose MAC is unresolved with
  /// its queue full: they go back to `parked` when a neighbour resolves or
  /// fails, so the record is delivered, or dropped as undeliverable, then.
  std::vector<uint64_t> host_wait;
  uint64_t last_rx_packets = 0;
  TimePoint last_rx;  ///< last datagram from the peer
  uint64_t delivered_packets = 0;
  uint64_t delivered_bytes = 0;
  uint64_t carried_packets = 0;
  uint64_t carried_bytes = 0;
  uint64_t ce_marked = 0;  ///< CE marks applied to this peer's flows
};

struct WorkerCounters {
  uint64_t local_rx_packets = 0;
  uint64_t local_rx_bytes = 0;
  uint64_t local_tx_packets = 0;
  uint64_t local_tx_bytes = 0;
  uint64_t arp_replies = 0;
  uint64_t arp_requests = 0;
  uint64_t flows_created = 0;
  uint64_t flows_expired = 0;
  uint64_t ce_marked = 0;
  uint64_t vlan_rx = 0;  ///< 802.1Q-tagged frames taken from the site port
  uint64_t vlan_tx = 0;  ///< tagged frames sent to the site (delivered packets, replies)
  uint64_t loops = 0;
  uint64_t idle_sleeps = 0;
  uint64_t rx_holds = 0;         ///< times the site port was left alone while no buffer had room
  uint64_t flow_cache_hits = 0;  ///< site frames classified by the flow cache (handle_ip)
  std::array<uint64_t, static_cast<size_t>(Drop::kCount)> drops{};
  /// Packets dropped at admission (backlog) by the kind of their flow. Unlike
  /// Flow::dropped these survive the flow's idle expiry.
  std::array<uint64_t, static_cast<size_t>(FlowKind::kOther) + 1> flow_drops{};
};

class WorkerSplitIo;

/// Which of the site's workers this is, and its duties (site.h).
struct WorkerOptions {
  uint32_t index = 0;             ///< 0..workers-1; WAN ports are offset by it
  uint32_t lcore = 0;             ///< the EAL lcore it runs on
  bool answers_neighbors = true;  ///< replies to ARP/ND for the gateway (worker 0)
  bool reports_port = true;       ///< reports the site port's own counters (one worker)
  /// The site's dpdk WAN ports, a queue pair per worker (null: the worker
  /// opens its own with one queue, and must be worker 0).
  DpdkWanPorts* wan_ports = nullptr;
};

class Worker {
 public:
  /// The longest the site port is left alone while no send buffer has room
  /// (local_rx, "receive livelock" below).
  static constexpr Duration kRxHoldMax = Duration::from_us(500);

  /// Opens the peers' WAN links and connections. Throws on failure.
  Worker(const GatewayConfig& cfg, SiteIo& local, const Clock& clock,
         const WorkerOptions& worker = {});
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// One pass of the packet loop at `now`; returns whether any packet moved.
  bool poll(TimePoint now) noexcept;
  /// When poll() must run again at the latest (transport timers).
  TimePoint next_timeout() const noexcept;
  /// Sleeps until a WAN completion arrives or `d` passes (idle back-off).
  /// After arm_wake() and one more empty poll(), a frame on the local port
  /// ends the sleep too (when can_block()).
  void idle_wait(Duration d) noexcept;
  /// True when idle_wait() wakes for local frames and WAN datagrams alike
  /// (an af_packet local port, every peer on one UDP socket): the loop may
  /// then sleep until its next timer instead of backing off in steps.
  bool can_block() const noexcept { return local_.wakes_for_frames() && sole_socket_ != nullptr; }
  /// Empties the local port's doorbell; poll() once more before idle_wait().
  void arm_wake() noexcept { local_.arm_wake(); }
  /// After poll() found work (a distributor stops waking this worker).
  void disarm_wake() noexcept { local_.disarm(); }
  const WorkerOptions& worker() const noexcept { return worker_; }

  /// Applies a reloaded config: routes, the [cc] algorithm and parameters (live
  /// connections swap their controller) and the flow idle timeout. Flows and
  /// connections stay up. Returns what changed.
  std::string reload(const GatewayConfig& cfg);

  /// Copies the state the control socket shows (packet lcore).
  void publish(TimePoint now);
  /// The packet loop's busy/idle time (the loop feeds it each pass).
  BusyMeter& busy_meter() noexcept { return busy_; }
  /// Packet lcore: a control request waits for a fresh publish().
  bool publish_wanted() const noexcept { return publish_wanted_.load(std::memory_order_acquire); }
  /// Control thread: the state for `cmd` (status|peers|links|flows) as of
  /// this request: asks the packet lcore to publish and waits for it (it
  /// sleeps at most a millisecond when idle); after `wait` without one (a
  /// wedged loop) it answers with the last published state.
  nlohmann::ordered_json snapshot(const std::string& cmd,
                                  Duration wait = Duration::from_ms(250)) const;

  const WorkerCounters& counters() const { return ctr_; }
  /// Exporter thread: a copy of the metrics publish() last copied
  /// (worker_metrics.cc).
  DataPathMetrics metrics() const;
  const std::vector<std::unique_ptr<PeerState>>& peers() const { return peers_; }

 private:
  struct Route {
    Prefix prefix;
    uint32_t peer;
    RouteMode mode;
    std::optional<VlanPolicy> vlan;  ///< toward the site, for packets from the prefix
  };
  void local_rx(TimePoint now) noexcept;
  void handle_arp(rte_mbuf* m, uint8_t* eth, uint32_t len, TimePoint now) noexcept;
  void handle_ip(rte_mbuf* m, uint8_t* ip, uint32_t len, TimePoint now) noexcept;
  bool classify(const uint8_t* ip, uint32_t len, FlowKey& key) noexcept;
  const Route* lookup(const roce::IpAddr& dst) const noexcept;
  /// Writes the IP packet as a record on the flow's stream; a tagged
  /// `tag` makes it a tagged record (vlan.h).
  bool write_record(PeerState& peer, Flow& flow, const uint8_t* ip, uint32_t len, TimePoint now,
                    const VlanTag& tag) noexcept;
  void flush_tails(TimePoint now) noexcept;
  void maybe_mark_ce(PeerState& peer, Flow& flow, uint8_t* ip, uint32_t len) noexcept;
  bool within_share(const PeerState& peer, Flow& flow, uint32_t rec) noexcept;
  void drain_peer(PeerState& peer, TimePoint now) noexcept;
  bool peer_restarted(PeerState& peer) noexcept;
  void reset_transport(PeerState& peer, TimePoint now) noexcept;
  void drain_stream(PeerState& peer, uint64_t id, TimePoint now) noexcept;
  /// The StreamSink of `peer`'s connection: copies whole records of stream
  /// `id` from a received datagram into site mbufs (their delivery waits for
  /// drain_peer); returns the bytes taken. Stops, leaving the rest to the
  /// stream's buffer, when the worker holds kDirectMax such records, the split
  /// engine holds the stream, or no mbuf is left.
  size_t take_in_order(PeerState& peer, uint64_t id, const uint8_t* data, size_t len) noexcept;
  /// Delivers stream `id`'s waiting records in order; false when some are
  /// left (the local TX queue is full or the split engine holds the stream).
  bool deliver_ready(PeerState& peer, uint64_t id, TimePoint now) noexcept;
  /// Delivers a whole record of `len` bytes at eth + 14 in `m` (one copy).
  void finish_record(PeerState& peer, uint64_t id, rte_mbuf* m, uint32_t len,
                     TimePoint now) noexcept;
  class InOrderSink;
  /// Site mbufs the worker may hold in records being filled or waiting for
  /// delivery (take_in_order), over all peers and streams: a bound on what
  /// records in place take from the site port's pool.
  static constexpr uint32_t kDirectMax = 512;
  uint32_t direct_held_ = 0;
  void resume_parked(TimePoint now) noexcept;
  /// Sends an IP packet to its site host. `tag`: the sender's tag across
  /// the WAN (`from_wan`: this site's policy chooses the tag, site_tag())
  /// or the tag to use as it is (the gateway's own answers to a local host).
  void deliver(const uint8_t* ip, uint32_t len, TimePoint now, const VlanTag& tag = {},
               bool from_wan = true) noexcept;
  /// The same for a record already read into `m` (at eth + 14; one copy).
  void deliver_frame(rte_mbuf* m, uint8_t* eth, uint32_t len, TimePoint now,
                     const VlanTag& sender) noexcept;
  /// The tag toward the site of a packet from the WAN (vlan.h).
  VlanTag site_tag_for(const uint8_t* ip, const VlanTag& sender) const noexcept;
  /// Inserts `tag` after the MACs of the frame in `m` (headroom); false when
  /// there is no room (the caller drops it).
  static bool push_tag(rte_mbuf* m, const VlanTag& tag) noexcept;
  bool deliverable(const uint8_t* ip, uint32_t len) noexcept;  ///< or drops and counts
  void send_to_host(rte_mbuf* m, uint8_t* eth, uint32_t len, TimePoint now,
                    const VlanTag& tag) noexcept;
  /// Asks for a host on the VLAN of `tag` (its VID, priority 0; none: untagged).
  void send_arp_request(const roce::IpAddr& ip, TimePoint now, const VlanTag& tag) noexcept;
  void handle_icmp6(rte_mbuf* m, uint8_t* ip, uint32_t len, TimePoint now) noexcept;
  void send_neighbor_solicitation(const roce::IpAddr& ip, const VlanTag& tag) noexcept;
  /// A reply to a site frame: tagged as the frame being handled was (rx_tag_).
  void reply_local(rte_mbuf* m) noexcept;
  void learn_neighbor(NeighborTable::Entry& e, const uint8_t* mac, TimePoint now) noexcept;
  /// Whether the record `rec` (a stream record: an IP packet, perhaps after
  /// a tagged header) is for a host whose MAC is unresolved and whose queue
  /// is full: delivering it now would drop an acknowledged record, so its
  /// stream waits (wait_for_host) instead.
  bool host_waits(const uint8_t* rec, uint32_t len) noexcept;
  void wait_for_host(PeerState& peer, uint64_t id) noexcept;
  /// Asks again for unresolved hosts, and fails those past kResolveTimeout.
  void age_neighbors(TimePoint now) noexcept;
  void ask_neighbor(NeighborTable::Entry& e, TimePoint now) noexcept;
  uint32_t unresolved_neighbors() const noexcept;
  size_t streams_waiting_for_host() const noexcept;
  void enqueue_local(rte_mbuf* m) noexcept;
  void flush_local() noexcept;
  void drop(Drop why, rte_mbuf* m = nullptr) noexcept;
  void housekeeping(TimePoint now) noexcept;
  uint32_t link_users(const std::string& name) const;
  UdpLinkMux& shared_link(const WanLinkConfig& link, const io::UdpUringOptions& o);
  /// Opens path `i` of peer `pc` (its socket or port, and its session).
  PeerPath open_path(const PeerConfig& pc, size_t i, const crypto::Key& private_key,
                     Duration wall_offset, TimePoint now);
  uint64_t connection_id(const PeerConfig& pc) const;
  /// Builds a peer's connection and driver over its paths.
  void open_transport(PeerState& p, TimePoint now);
  struct Published;
  /// Packet lcore (publish): copies what the control socket shows into `out`.
  void copy_state(TimePoint now, Published& out) const;
  // Control thread (worker_snapshot.cc): JSON from a copy. Names, endpoints
  // and link settings come from cfg_ and the peers' paths, which nothing
  // changes after construction; everything that moves comes from the copy.
  nlohmann::ordered_json render(const std::string& cmd, const Published& pub) const;
  nlohmann::ordered_json render_status(const Published& pub) const;
  nlohmann::ordered_json render_peers(const Published& pub) const;
  nlohmann::ordered_json render_links(const Published& pub) const;
  nlohmann::ordered_json render_flows(const Published& pub) const;
  void fill_metrics(TimePoint now, DataPathMetrics& m) const;  ///< worker_metrics.cc

  GatewayConfig cfg_;
  SiteIo& local_;
  WorkerOptions worker_;
  [[maybe_unused]] const Clock& clock_;  ///< the packet loop passes `now`; kept for owners
  Mac mac_{};
  Prefix site_;   ///< the local subnet
  Prefix site6_;  ///< the local IPv6 subnet of a dual-stack site (none: version 0)
  std::vector<Route> routes_;
  bool route_vlans_ = false;  ///< some route has its own VLAN policy (site_tag_for)
  /// UDP links several peers share (wan_link_mux.h); before peers_, whose
  /// ports they own, so they are destroyed after them.
  std::vector<std::pair<const WanLinkConfig*, std::unique_ptr<UdpLinkMux>>> shared_links_;
  /// Dpdk WAN ports when WorkerOptions gave none; before peers_, likewise.
  std::unique_ptr<DpdkWanPorts> own_wan_ports_;
  std::vector<std::unique_ptr<PeerState>> peers_;
  /// The one UDP socket every peer's datagrams arrive on, if there is one
  /// (idle_wait sleeps on it); null otherwise.
  io::UdpUringIo* sole_socket_ = nullptr;
  /// What this worker's link-security handshakes announce (every path's).
  uint64_t incarnation_ = 0;
  FlowTable flows_;
  NeighborTable neigh_;
  uint32_t neigh_full_ = 0;     ///< entries full() (records may wait on them)
  bool neigh_changed_ = false;  ///< one resolved or failed: resume host_wait
  VlanTag rx_tag_;              ///< the 802.1Q tag of the site frame being handled (local_rx)
  WorkerCounters ctr_;

  static constexpr uint16_t kBurst = 32;
  static constexpr uint32_t kTxQueue = 1024;
  std::array<rte_mbuf*, kTxQueue> txq_{};
  uint32_t txq_head_ = 0, txq_len_ = 0;
  std::vector<uint8_t> scratch_;  ///< a record read from the WAN when no mbuf holds it

  TimePoint started_;  ///< construction: `status` reports the uptime from it
  BusyMeter busy_;
  TimePoint next_housekeeping_;
  TimePoint window_start_;
  uint64_t window_total_ = 0, last_window_total_ = 0;
  uint32_t window_flows_ = 0, last_window_flows_ = 0;
  uint32_t window_epoch_ = 1;  ///< numbers the backlog windows (Flow::offered_epoch)
  uint32_t window_offered_ = 0, last_window_offered_ = 0;  ///< flows that sent a packet
  bool moved_ = false;
  uint32_t tails_ = 0;  ///< flows holding a partly written record
  // Receive livelock (Mogul and Ramakrishnan, "Eliminating receive livelock
  // in an interrupt-driven kernel", 1997): while no peer's send buffer can
  // take a record, every frame taken from the site port is dropped, and the
  // CPU spent taking it is lost to the transport that would make room. The
  // site port is then left alone (its ring holds the frames, or drops them
  // at no CPU cost) until a burst of records fits again, or for at most
  // kRxHoldMax, so ARP and the like still get through.
  bool rx_held_ = false;
  TimePoint rx_held_since_;
  uint32_t burst_backlog_ = 0;   ///< backlog drops in the site burst being handled
  uint32_t backlog_record_ = 0;  ///< the size of the last record refused for backlog
  bool room_for(uint32_t records) const noexcept;

  // The flow cache: the header bytes that identify the flow of the last site
  // frame classified (IPv4 TCP or UDP: addresses, protocol, header length,
  // ports and, for RoCE, the destination QP), with its flow and route. A
  // frame whose bytes are the same takes them without a parse, a route
  // lookup, a hash or a key compare: the common case, since a host sends a
  // message as a train of frames of one QP or connection. Equal bytes mean
  // the same flow (classify() would build the same key from them; RoCE keys
  // leave out the UDP source port, so a different one is only a miss).
  // Cleared when flows expire (a slot may then hold another flow) and when
  // the routes are reloaded.
  struct FlowHint {
    uint64_t w[3] = {};
    bool operator==(const FlowHint&) const = default;
  };
  /// False for a frame the cache does not take (not IPv4 TCP/UDP, a
  /// fragment, or too short for its ports or BTH).
  static bool flow_hint(const uint8_t* ip, uint32_t len, FlowHint* h) noexcept;
  FlowHint hint_;
  Flow* hint_flow_ = nullptr;
  const Route* hint_route_ = nullptr;

  friend class WorkerSplitIo;  ///< split mode's access to carrying and delivery
  std::unique_ptr<WorkerSplitIo> split_io_;
  std::unique_ptr<SplitEngine> split_;  ///< split-mode routes (split_engine.h)

  mutable std::mutex snap_mu_;
  mutable std::condition_variable snap_cv_;
  mutable std::atomic<bool> publish_wanted_{false};
  uint64_t snap_gen_ = 0;    ///< publishes so far; guarded by snap_mu_
  DataPathMetrics metrics_;  ///< guarded by snap_mu_
  /// A flow as `rowanctl flows` lists it.
  struct FlowView {
    FlowKey key;
    uint32_t peer = 0;
    uint64_t stream = 0, packets = 0, bytes = 0, ce_marked = 0, dropped = 0, buffered = 0;
    double idle_s = 0;
  };
  static constexpr size_t kListedFlows = 1000;
  /// A path's counters and the transport's view of it.
  struct PathCopy {
    io::IoStats io;
    io::UdpStats udp;  ///< its socket's, own or shared (udp backend)
    bool gso = false, gro = false;
    std::array<uint64_t, static_cast<size_t>(MuxDrop::kCount)> mux_drops{};
    DpdkWanStats wan;  ///< dpdk backend
    PortStats port;    ///< dpdk backend, queue 0's worker
    bool resolved = false;
    transport::PathStats s;
    bool session_up = false;
  };
  struct PeerCopy {
    transport::ConnStats s;
    std::vector<PathCopy> paths;
    bool up = false, seen = false;
    uint64_t outages = 0;
    Duration outage_total, down_for, last_outage;
    TimePoint last_rx;
    std::string cc;
    Bytes bdp = 0, send_budget = 0;
    uint64_t carried_packets = 0, carried_bytes = 0, delivered_packets = 0, delivered_bytes = 0;
    crypto::SecureStats ss;
    bool peer_up = false;
    uint64_t transport_resets = 0;
  };
  /// What the control socket shows, as plain values (publish copies it).
  struct Published {
    TimePoint at;
    WorkerCounters ctr;
    PortStats local_port;
    std::vector<Route> routes;
    uint64_t flows = 0, neighbors = 0, unresolved = 0, waiting = 0;
    double busy = 0;
    SplitEngine::View split;
    std::vector<PeerCopy> peers;
    std::vector<FlowView> listed;  ///< up to kListedFlows
  };
  Published pub_;       ///< guarded by snap_mu_
  Published pub_next_;  ///< the worker's, swapped in under snap_mu_
};

/// "198.18.1.10", "2001:2::10" (control path).
std::string ip_text(const roce::IpAddr& a);

/// Connection id both gateways of a pair derive alike from their endpoints.
uint64_t pair_connection_id(const SockAddr& a, const SockAddr& b);

}  // namespace rowan::gw
