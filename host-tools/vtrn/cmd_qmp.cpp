// `vtrn qmp CHIP COMMAND...`: the chip's QEMU monitor through vtrnd's own
// QMP connection (the chip keeps running; the gdbstub would stop it).
//   vtrn qmp 0 info pci                 HMP, the monitor's text as it prints it
//   vtrn qmp 0 -- info registers -a     `--` before words that start with '-'
//   vtrn qmp 0 --json query-status      raw QMP: {"return": ...} on stdout
//   vtrn qmp 0 --json qom-list '{"path":"/machine"}'
//   vtrn qmp 0 --json '{"execute":"query-pci"}'
// vtrnd passes only its read-only allow list unless it was started with
// --allow-qmp-write (driver/vtrnd/qmp_policy.h), and only for the admin.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "render.h"

namespace tools {
namespace {

struct QmpOptions {
  uint32_t chip = 0;
  std::string first;
  std::vector<std::string> words;
  bool json = false;
};

// A monitor command can take as long as QEMU needs (info mtree of a large
// machine); this only catches a QEMU or vtrnd that stopped answering.
constexpr int kQmpTimeoutMs = 30000;

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// --json: the words are a QMP object, or a command name and its arguments.
std::string qmp_object(const std::vector<std::string>& words) {
  if (words.size() == 1 && !words[0].empty() && words[0][0] == '{') return words[0];
  if (words.size() > 2)
    throw CliError(Exit::kUsage, "qmp --json takes COMMAND [ARGUMENTS-JSON] or one QMP object, got " +
                                     std::to_string(words.size()) + " words");
  nlohmann::json cmd = {{"execute", words[0]}};
  if (words.size() == 2) {
    nlohmann::json args = nlohmann::json::parse(words[1], nullptr, false);
    if (args.is_discarded() || !args.is_object())
      throw CliError(Exit::kUsage, "qmp --json: arguments '" + words[1].substr(0, 60) + "' are not a JSON object");
    cmd["arguments"] = std::move(args);
  }
  return cmd.dump();
}

// The monitor words as typed: the first fills the `command` positional, the
// rest are the subcommand's extras, so that CLI11 hands them over verbatim
// (a vector option would split '[1,2]' into "1" and "2"). A "--" among
// them ends the options; before it an extra that starts with '-' is an
// option this command does not have.
std::vector<std::string> monitor_words(const std::string& first, const std::vector<std::string>& extras) {
  std::vector<std::string> words{first};
  bool options_ended = false;
  for (const std::string& w : extras) {
    if (w == "--" && !options_ended) {
      options_ended = true;
      continue;
    }
    if (!options_ended && w.size() > 1 && w[0] == '-')
      throw CliError(Exit::kUsage, "qmp: unknown option '" + w + "' (put -- before monitor words that start with '-')");
    words.push_back(w);
  }
  return words;
}

void run_qmp(const QmpOptions& o) {
  std::string text = o.json ? qmp_object(o.words) : join(o.words);
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__QmpRequest r = VTRN__API__QMP_REQUEST__INIT;
  r.chip = o.chip;
  if (o.json) {
    r.command_case = VTRN__API__QMP_REQUEST__COMMAND_QMP_JSON;
    r.qmp_json = text.data();
  } else {
    r.command_case = VTRN__API__QMP_REQUEST__COMMAND_HMP;
    r.hmp = text.data();
  }
  req.body_case = VTRN__API__REQUEST__BODY_QMP;
  req.qmp = &r;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_QMP, kQmpTimeoutMs);
  const Vtrn__Api__QmpResponse& qr = *resp->qmp;
  if (o.json) {
    nlohmann::json ret = nlohmann::json::parse(qr.return_json ? qr.return_json : "", nullptr, false);
    if (ret.is_discarded()) throw CliError(Exit::kFailed, "vtrnd passed on a QMP answer that is not JSON");
    print_json({{"return", std::move(ret)}});
    return;
  }
  const std::string out = qr.output ? qr.output : "";
  std::cout << out;
  if (!out.empty() && out.back() != '\n') std::cout << "\n";
}

}  // namespace

void add_qmp_command(CLI::App& app, Action* action) {
  auto o = std::make_shared<QmpOptions>();
  CLI::App* c = app.add_subcommand(
      "qmp", "Send a command to a chip's QEMU monitor (HMP text; raw QMP with --json; read-only unless "
             "vtrnd runs with --allow-qmp-write)");
  c->add_option("chip", o->chip, "Chip id")->required()->check(chip_id_validator());
  c->add_option("command", o->first,
                "HMP command line (info pci, info mtree, info registers); with --json a QMP command and "
                "its arguments object, or one QMP object. Put -- before words that start with '-'")
      ->required();
  c->add_flag("--json", o->json, "Raw QMP: print {\"return\": ...}");
  c->allow_extras();
  c->callback([o, c, action] {
    *action = [o, extras = c->remaining()] {
      o->words = monitor_words(o->first, extras);
      run_qmp(*o);
    };
  });
}

}  // namespace tools
