// `vtrn link ls|retrain|inject|send` and `vtrn topo`: the board's
// chip-to-chip links through vtrnd.
//
// `topo --dot` prints the same snapshot as a Graphviz graph (topo_dot.h),
// `--svg FILE` renders it with Graphviz's dot.
//
// ls and topo are snapshots of what each chip's firmware last published in
// its BAR2 link block (vtrnd reads it, this process only renders); retrain,
// inject and send are ctrl requests to the chip that owns the port, answered
// with the port's state right after the action. Training and recovery happen
// afterwards, over milliseconds: poll `vtrn link ls` to watch them.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "render.h"
#include "topo_dot.h"

extern char** environ;

namespace tools {
namespace {

std::string peer_text(const Vtrn__Api__LinkPortStatus& p) {
  if (!p.wired) return "-";
  std::string s = std::string(p.peer_kind) + " " + std::to_string(p.peer_id) + "." +
                  std::to_string(p.peer_port);
  if (!p.peer_on_board) s += " (absent)";
  return s;
}

std::string ber_text(double ber) {
  if (ber <= 0) return "-";
  char b[32];
  snprintf(b, sizeof b, "%.1e", ber);
  return b;
}

nlohmann::json port_json(const Vtrn__Api__LinkPortStatus& p) {
  nlohmann::json j = {{"chip", p.chip},
                      {"port", p.port},
                      {"on_switch", bool(p.on_switch)},
                      {"state", p.state},
                      {"speed", p.speed},
                      {"width", p.width},
                      {"reason", p.reason},
                      {"last_down", p.last_down},
                      {"last_recovery", p.last_recovery},
                      {"wired", bool(p.wired)},
                      {"function", bool(p.function)},
                      {"peer_kind", p.peer_kind},
                      {"peer_id", p.peer_id},
                      {"peer_port", p.peer_port},
                      {"peer_on_board", bool(p.peer_on_board)},
                      {"link", p.link},
                      {"side", p.side},
                      {"max_speed", p.max_speed},
                      {"lanes", p.lanes},
                      {"good_lanes", p.good_lanes},
                      {"disabled", bool(p.disabled)},
                      {"ber", p.ber},
                      {"bandwidth_mbps", p.bandwidth_mbps},
                      {"state_ms", p.state_ms},
                      {"error", p.error}};
  if (p.counters != nullptr) {
    const Vtrn__Api__LinkCounters& c = *p.counters;
    j["counters"] = {{"tx_bytes", c.tx_bytes},
                     {"rx_bytes", c.rx_bytes},
                     {"tx_frames", c.tx_frames},
                     {"rx_frames", c.rx_frames},
                     {"crc_errors", c.crc_errors},
                     {"seq_errors", c.seq_errors},
                     {"naks_sent", c.naks_sent},
                     {"naks_received", c.naks_received},
                     {"replays", c.replays},
                     {"replayed_frames", c.replayed_frames},
                     {"replay_timeouts", c.replay_timeouts},
                     {"duplicates", c.duplicates},
                     {"retrains", c.retrains},
                     {"failed_retrains", c.failed_retrains},
                     {"downgrades", c.downgrades},
                     {"link_ups", c.link_ups},
                     {"link_downs", c.link_downs},
                     {"transport_errors", c.transport_errors},
                     {"protocol_errors", c.protocol_errors},
                     {"tx_dropped", c.tx_dropped},
                     {"injected_bit_errors", c.injected_bit_errors},
                     {"ts_sent", c.ts_sent},
                     {"ts_received", c.ts_received},
                     {"l0s_entries", c.l0s_entries},
                     {"l1_entries", c.l1_entries},
                     {"gen_pending_bytes", c.gen_pending_bytes},
                     {"gen_sent_bytes", c.gen_sent_bytes},
                     {"check_good_frames", c.check_good_frames},
                     {"check_bad_frames", c.check_bad_frames},
                     {"check_good_bytes", c.check_good_bytes},
                     {"ping_pending", c.ping_pending},
                     {"ping_done", c.ping_done},
                     {"ping_rtt_total_ns", c.ping_rtt_total_ns},
                     {"ping_rtt_min_ns", c.ping_rtt_min_ns},
                     {"ping_rtt_max_ns", c.ping_rtt_max_ns}};
  }
  return j;
}

// The ports of one chip, or of every chip (all_chips), with the switches'
// ports too when asked.
drv::ResponsePtr request_link_list(DaemonConnection& conn, bool all_chips, uint32_t chip, bool switches) {
  Vtrn__Api__LinkListRequest body = VTRN__API__LINK_LIST_REQUEST__INIT;
  body.all_chips = all_chips;
  body.chip = chip;
  body.switches = switches;
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  req.body_case = VTRN__API__REQUEST__BODY_LINK_LIST;
  req.link_list = &body;
  return conn.call(&req, VTRN__API__RESPONSE__BODY_LINK_LIST);
}

struct LinkLsOptions {
  std::string chip;
  bool switches = false;
  bool json = false;
};

void run_link_ls(const LinkLsOptions& o) {
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr resp =
      request_link_list(conn, o.chip.empty(), o.chip.empty() ? 0 : uint32_t(std::stoul(o.chip)), o.switches);
  const Vtrn__Api__LinkListResponse& l = *resp->link_list;
  nlohmann::json ports = nlohmann::json::array();
  Table t({"chip", "port", "state", "speed", "width", "peer", "reason", "tx", "rx", "crc", "replays",
           "retrains", "downgr", "l0s/l1", "ber"});
  for (size_t i = 0; i < l.n_ports; ++i) {
    const Vtrn__Api__LinkPortStatus& p = *l.ports[i];
    ports.push_back(port_json(p));
    const Vtrn__Api__LinkCounters* c = p.counters;
    const std::string where = (p.on_switch ? "sw" : "") + std::to_string(p.chip);
    if (p.error[0] != '\0') {
      t.add({where, std::to_string(p.port), "-", "-", "-", "-", p.error, "-", "-", "-", "-", "-", "-",
             "-", "-"});
      continue;
    }
    // An idle link resting in L0s or L1 is up, nothing to explain.
    const std::string st = p.state;
    const std::string reason = !p.wired                                  ? "not wired"
                               : st == "L0" || st == "L0s" || st == "L1" ? "-"
                                                                         : std::string(p.reason);
    t.add({where, std::to_string(p.port), p.state, p.speed,
           p.width ? "x" + std::to_string(p.width) : "-", peer_text(p),
           p.disabled ? std::string("disabled") : reason,
           c ? format_bytes(c->tx_bytes) : "-", c ? format_bytes(c->rx_bytes) : "-",
           c ? std::to_string(c->crc_errors) : "-", c ? std::to_string(c->replays) : "-",
           c ? std::to_string(c->retrains) : "-", c ? std::to_string(c->downgrades) : "-",
           // ASPM entries (L0s / L1).
           c ? std::to_string(c->l0s_entries) + "/" + std::to_string(c->l1_entries) : "-",
           ber_text(p.ber)});
  }
  if (o.json) {
    print_json({{"ports", ports}});
    return;
  }
  fputs(t.render().c_str(), stdout);
}

struct ControlOptions {
  std::string chip;
  uint32_t port = 0;
  double ber = -1;
  bool down = false;
  bool up = false;
  int lane = -1;
  bool good = false;
  bool restore = false;
  std::string bytes;
  uint64_t send_bytes = 0;
  uint32_t ping_count = 0;
  bool json = false;
};

void run_control(const ControlOptions& o, Vtrn__Types__LinkAction action, const char* verb) {
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__LinkControlRequest body = VTRN__API__LINK_CONTROL_REQUEST__INIT;
  body.chip = uint32_t(std::stoul(o.chip));
  body.port = o.port;
  body.action = action;
  body.ber = o.ber > 0 ? o.ber : 0;
  body.lane = o.lane >= 0 ? uint32_t(o.lane) : 0;
  body.bytes = o.send_bytes;
  body.count = o.ping_count;
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  req.body_case = VTRN__API__REQUEST__BODY_LINK_CONTROL;
  req.link_control = &body;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_LINK_CONTROL);
  const std::string state = resp->link_control->state;
  if (verb == nullptr) return;  // the caller reports
  if (o.json) {
    print_json({{"chip", body.chip}, {"port", o.port}, {"action", verb}, {"state", state}});
    return;
  }
  printf("chip %u port %u: %s, now %s\n", unsigned(body.chip), unsigned(o.port), verb,
         state.c_str());
}

// The port's ping counters as the firmware last published them.
struct PingCounters {
  uint64_t pending = 0, done = 0, total_ns = 0, min_ns = 0, max_ns = 0;
  std::string state;
};

PingCounters read_ping_counters(DaemonConnection& conn, uint32_t chip, uint32_t port) {
  drv::ResponsePtr resp = request_link_list(conn, false, chip, false);
  for (size_t i = 0; i < resp->link_list->n_ports; ++i) {
    const Vtrn__Api__LinkPortStatus& p = *resp->link_list->ports[i];
    if (p.chip != chip || p.port != port) continue;
    if (p.counters == nullptr)
      throw CliError(Exit::kFailed, "chip " + std::to_string(chip) + " port " + std::to_string(port) +
                                        ": no counters (" + std::string(p.error ? p.error : "") + ")");
    const Vtrn__Api__LinkCounters& c = *p.counters;
    return {c.ping_pending, c.ping_done, c.ping_rtt_total_ns, c.ping_rtt_min_ns, c.ping_rtt_max_ns, p.state};
  }
  throw CliError(Exit::kFailed, "chip " + std::to_string(chip) + " has no port " + std::to_string(port));
}

// Starts a batch of pings, waits for the echoes, prints the batch's round
// trips (chip clock: queueing the ping to reading the echo).
void run_link_ping(const ControlOptions& o) {
  const uint32_t chip = uint32_t(std::stoul(o.chip));
  DaemonConnection conn = DaemonConnection::open();
  const PingCounters before = read_ping_counters(conn, chip, o.port);
  run_control(o, VTRN__TYPES__LINK_ACTION__LINK_ACTION_PING, nullptr);
  // One round trip takes well under 100 ms even on a starved chip; a port
  // that stops answering (down, peer gone) ends the wait with a timeout.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(10000 + 100ull * o.ping_count);
  PingCounters now = before;
  while (now.done < before.done + o.ping_count) {
    if (std::chrono::steady_clock::now() > deadline)
      throw CliError(Exit::kTimeout, "chip " + o.chip + " port " + std::to_string(o.port) + ": " +
                                         std::to_string(now.done - before.done) + " of " +
                                         std::to_string(o.ping_count) + " echoes came back (link " +
                                         now.state + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    now = read_ping_counters(conn, chip, o.port);
  }
  const uint64_t n = now.done - before.done;
  const double avg_ns = double(now.total_ns - before.total_ns) / double(n);
  if (o.json) {
    print_json({{"chip", chip}, {"port", o.port}, {"round_trips", n}, {"rtt_avg_ns", avg_ns},
                {"rtt_min_ns", now.min_ns}, {"rtt_max_ns", now.max_ns}, {"state", now.state}});
    return;
  }
  printf("chip %u port %u: %llu round trips, min %s, avg %s, max %s (link now %s)\n", unsigned(chip),
         unsigned(o.port), (unsigned long long)n, format_ns(now.min_ns).c_str(), format_ns(avg_ns).c_str(),
         format_ns(now.max_ns).c_str(), now.state.c_str());
}

void run_link_inject(const ControlOptions& o) {
  const int chosen = (o.ber >= 0) + o.down + o.up + (o.lane >= 0) + o.restore;
  if (chosen != 1)
    throw CliError(Exit::kUsage,
                   "link inject: give exactly one of --ber RATE, --down, --up, --lane N, --restore");
  if (o.good && o.lane < 0) throw CliError(Exit::kUsage, "link inject: --good needs --lane N");
  if (o.ber >= 0) {
    run_control(o, VTRN__TYPES__LINK_ACTION__LINK_ACTION_BER, o.ber > 0 ? "bit errors injected" : "bit errors off");
  } else if (o.down) {
    run_control(o, VTRN__TYPES__LINK_ACTION__LINK_ACTION_DOWN, "disabled");
  } else if (o.up) {
    run_control(o, VTRN__TYPES__LINK_ACTION__LINK_ACTION_UP, "enabled");
  } else if (o.lane >= 0) {
    run_control(o, o.good ? VTRN__TYPES__LINK_ACTION__LINK_ACTION_LANE_GOOD
                          : VTRN__TYPES__LINK_ACTION__LINK_ACTION_LANE_FAULT,
                o.good ? "lane repaired" : "lane marked faulty");
  } else {
    run_control(o, VTRN__TYPES__LINK_ACTION__LINK_ACTION_RESTORE, "downgrades forgotten");
  }
}

struct TopoOptions {
  bool json = false;
  bool dot = false;
  std::string svg;  // render to this file with Graphviz
};

// `dot -Tsvg -o FILE` fed `graph` on stdin (no shell: FILE is passed as is).
// Graphviz's first complaint becomes the error line.
void render_svg(const std::string& graph, const std::string& file) {
  int in[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    throw CliError(Exit::kFailed, std::string("pipe: ") + strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
  const char* dot = getenv("VTRN_DOT") != nullptr ? getenv("VTRN_DOT") : "dot";
  std::vector<char*> argv = {const_cast<char*>(dot), const_cast<char*>("-Tsvg"), const_cast<char*>("-o"),
                             const_cast<char*>(file.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, dot, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(err[1]);
  if (rc != 0) {
    close(in[1]);
    close(err[0]);
    throw CliError(Exit::kFailed, std::string("cannot run ") + dot + " (Graphviz, Debian package graphviz): " +
                                      strerror(rc));
  }
  // A graph of a few hundred KiB fits no pipe: write it all while dot reads
  // (dot reads the whole graph before it writes anything to stderr). A dot
  // that gives up early must not kill this process with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  size_t off = 0;
  while (off < graph.size()) {
    const ssize_t n = write(in[1], graph.data() + off, graph.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += size_t(n);
  }
  close(in[1]);
  std::string complaint;
  char buf[512];
  for (;;) {
    const ssize_t n = read(err[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    complaint.append(buf, size_t(n));
  }
  close(err[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string first = complaint.substr(0, complaint.find('\n'));
    throw CliError(Exit::kFailed, std::string(dot) + " could not render " + file +
                                      (first.empty() ? "" : ": " + first));
  }
}

void run_topo(const TopoOptions& o) {
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__TopoRequest body = VTRN__API__TOPO_REQUEST__INIT;
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  req.body_case = VTRN__API__REQUEST__BODY_TOPO;
  req.topo = &body;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_TOPO);
  const Vtrn__Api__TopoResponse& tr = *resp->topo;
  auto end_json = [](const Vtrn__Api__TopoEnd& e) {
    return nlohmann::json{{"kind", e.kind},   {"id", e.id},       {"port", e.port},
                          {"on_board", bool(e.on_board)}, {"state", e.state}, {"speed", e.speed},
                          {"width", e.width}};
  };
  auto end_text = [](const Vtrn__Api__TopoEnd& e) {
    return std::string(e.kind) + " " + std::to_string(e.id) + "." + std::to_string(e.port);
  };
  nlohmann::json links = nlohmann::json::array();
  nlohmann::json switches = nlohmann::json::array();
  Table t({"link", "a", "state", "b", "state", "speed", "width"});
  for (size_t i = 0; i < tr.n_links; ++i) {
    const Vtrn__Api__TopoLink& l = *tr.links[i];
    links.push_back({{"index", l.index}, {"a", end_json(*l.a)}, {"b", end_json(*l.b)}});
    const std::string speed = std::string(l.a->speed) != "-" ? l.a->speed : l.b->speed;
    const uint32_t width = l.a->width ? l.a->width : l.b->width;
    t.add({std::to_string(l.index), end_text(*l.a), l.a->state, end_text(*l.b), l.b->state, speed,
           width ? "x" + std::to_string(width) : "-"});
  }
  for (size_t i = 0; i < tr.n_switches; ++i) {
    const Vtrn__Api__TopoSwitch& s = *tr.switches[i];
    switches.push_back({{"id", s.id},
                        {"ports", s.ports},
                        {"max_speed_gtps", s.max_speed_gtps},
                        {"lanes", s.lanes},
                        {"ports_up", s.ports_up}});
  }
  const nlohmann::json doc = {{"model", tr.model},
                              {"chips", tr.chips},
                              {"links_up", tr.links_up},
                              {"links", links},
                              {"switches", switches}};
  if (o.dot || !o.svg.empty()) {
    // Error counts per chip port and each chip's state, for the picture.
    drv::ResponsePtr lr = request_link_list(conn, true, 0, false);
    nlohmann::json ports = nlohmann::json::array();
    for (size_t i = 0; i < lr->link_list->n_ports; ++i) ports.push_back(port_json(*lr->link_list->ports[i]));
    drv::ResponsePtr ls = request_list(conn);
    nlohmann::json states = nlohmann::json::object();
    for (size_t i = 0; i < ls->list->n_chips; ++i)
      states[std::to_string(ls->list->chips[i]->id)] = state_name(ls->list->chips[i]->state);
    const std::string graph = topo_to_dot(doc, ports, states);
    if (!o.svg.empty()) render_svg(graph, o.svg);
    if (o.dot) {
      fputs(graph.c_str(), stdout);
    } else if (o.json) {
      print_json({{"svg", o.svg}, {"bytes", graph.size()}, {"chips", tr.chips}, {"links", tr.n_links},
                  {"switches", tr.n_switches}});
    } else {
      printf("wrote %s (%u chips, %zu links, %zu switches)\n", o.svg.c_str(), unsigned(tr.chips), tr.n_links,
             tr.n_switches);
    }
    return;
  }
  if (o.json) {
    print_json(doc);
    return;
  }
  printf("board %s: %u chips, %zu links (%u up), %zu switches\n", tr.model, unsigned(tr.chips),
         tr.n_links, unsigned(tr.links_up), tr.n_switches);
  for (size_t i = 0; i < tr.n_switches; ++i) {
    const Vtrn__Api__TopoSwitch& s = *tr.switches[i];
    printf("  switch %u: %u ports (%u up), %u GT/s x%u\n", unsigned(s.id), unsigned(s.ports),
           unsigned(s.ports_up), unsigned(s.max_speed_gtps), unsigned(s.lanes));
  }
  fputs(t.render().c_str(), stdout);
}

}  // namespace

void add_link_commands(CLI::App& app, Action* action) {
  CLI::App* link = app.add_subcommand("link", "Chip-to-chip links: state, retraining, error injection");
  link->require_subcommand(1);

  auto ls = std::make_shared<LinkLsOptions>();
  CLI::App* l = link->add_subcommand("ls", "Link ports: state, speed, width, peer and counters");
  l->add_option("chip", ls->chip, "Chip id (default: every chip)")->check(chip_id_validator());
  l->add_flag("--switches", ls->switches, "Also list the switch ports vtrnd runs");
  l->add_flag("--json", ls->json, "Print one JSON document instead of text");
  l->callback([ls, action] { *action = [ls] { run_link_ls(*ls); }; });

  auto rt = std::make_shared<ControlOptions>();
  CLI::App* r = link->add_subcommand("retrain", "Retrain a link port (enter Recovery)");
  r->add_option("chip", rt->chip, "Chip id")->required()->check(chip_id_validator());
  r->add_option("port", rt->port, "Port")->required()->check(CLI::Range(0u, 15u));
  r->add_flag("--json", rt->json, "Print one JSON document instead of text");
  r->callback([rt, action] {
    *action = [rt] { run_control(*rt, VTRN__TYPES__LINK_ACTION__LINK_ACTION_RETRAIN, "retraining"); };
  });

  auto in = std::make_shared<ControlOptions>();
  CLI::App* i = link->add_subcommand("inject", "Inject link faults: bit errors, a down port, a bad lane");
  i->add_option("chip", in->chip, "Chip id")->required()->check(chip_id_validator());
  i->add_option("port", in->port, "Port")->required()->check(CLI::Range(0u, 15u));
  i->add_option("--ber", in->ber, "Bit-error rate on what this end sends (0 turns it off)")
      ->check(CLI::Range(0.0, 0.01));
  i->add_flag("--down", in->down, "Disable the port (the peer stays in Detect)");
  i->add_flag("--up", in->up, "Enable a port disabled with --down");
  i->add_option("--lane", in->lane, "Mark lane N faulty (the link retrains narrower)")
      ->check(CLI::Range(0, 15));
  i->add_flag("--good", in->good, "With --lane: mark the lane working again");
  i->add_flag("--restore", in->restore, "Forget speed/width downgrades and retrain");
  i->add_flag("--json", in->json, "Print one JSON document instead of text");
  i->callback([in, action] { *action = [in] { run_link_inject(*in); }; });

  auto sd = std::make_shared<ControlOptions>();
  CLI::App* s = link->add_subcommand("send", "Send pattern frames over a link; the peer checks them");
  s->add_option("chip", sd->chip, "Chip id")->required()->check(chip_id_validator());
  s->add_option("port", sd->port, "Port")->required()->check(CLI::Range(0u, 15u));
  s->add_option("--bytes", sd->send_bytes, "Bytes to send (K, M, G suffixes)")
      ->required()
      ->transform(size_validator(1, uint64_t(1) << 30));
  s->add_flag("--json", sd->json, "Print one JSON document instead of text");
  s->callback([sd, action] {
    *action = [sd] { run_control(*sd, VTRN__TYPES__LINK_ACTION__LINK_ACTION_SEND, "sending"); };
  });

  auto pg = std::make_shared<ControlOptions>();
  CLI::App* pi = link->add_subcommand(
      "ping", "Round trips through a link, one at a time (the peer echoes): min, average, max");
  pi->add_option("chip", pg->chip, "Chip id")->required()->check(chip_id_validator());
  pi->add_option("port", pg->port, "Port")->required()->check(CLI::Range(0u, 15u));
  pi->add_option("--count", pg->ping_count, "Round trips")->check(CLI::Range(1u, 100000u))->default_val(100);
  pi->add_flag("--json", pg->json, "Print one JSON document instead of text");
  pi->callback([pg, action] {
    *action = [pg] { run_link_ping(*pg); };
  });

  auto tp = std::make_shared<TopoOptions>();
  CLI::App* t = app.add_subcommand("topo", "The board's topology with live link states");
  auto* js = t->add_flag("--json", tp->json, "Print one JSON document instead of text");
  auto* dot = t->add_flag("--dot", tp->dot,
                          "Print the topology as a Graphviz DOT graph: live link states, speeds, error counts");
  t->add_option("--svg", tp->svg, "Render the graph to FILE as SVG with Graphviz's dot");
  dot->excludes(js);
  t->callback([tp, action] { *action = [tp] { run_topo(*tp); }; });
}

}  // namespace tools
