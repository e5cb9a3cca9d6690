/// @file cli.h
/// @brief The flags every lab shares and the one main() wrapper that turns outcomes into exit codes.
///
/// Parsing is CLI11's (a maintained, header-only library with validators and generated --help).
#pragma once
#include <c10/core/Device.h>
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/observations.h"

namespace speedlabs {

/// Who a lab program is.
struct LabInfo {
  std::string number;       ///< "01"
  std::string folder;       ///< "01_vectorize"
  std::string description;  ///< one line for --help
  bool cpu_only = false;    ///< the experiment always runs on the CPU; --device is checked, then reported as cpu
};

/// The flags every lab has.
struct CommonFlags {
  std::string device = "auto";  ///< --device auto|cpu|cuda|mps
  std::string json_path;        ///< --json PATH: write the observations there
  bool quick = false;           ///< --quick: small sizes, a few seconds at most
};

/// What the experiment gets: the chosen device and the common flags.
struct LabContext {
  c10::Device device;  ///< the device chosen from --device (the CPU for a cpu_only lab)
  CommonFlags flags;   ///< the common flags as given
};

/// Adds the lab's own flags to the parser.
using AddFlags = std::function<void(CLI::App&)>;
/// Runs the experiment and records what it observed.
using RunExperiment = std::function<void(const LabContext&, Report&)>;

/// The whole main() of a lab: parse the flags (--help prints them), check the --json path, pick the
/// device, run, print the observation table, write --json atomically and return the exit code:
/// 0 all must-hold observations hold, 1 one fails, 2 usage error, 3 the run could not be made
/// (missing data, NaN, out of memory), 4 an exercise is still a stub.
int run_lab(int argc, char** argv, const LabInfo& info, const AddFlags& add_flags, const RunExperiment& run);

/// What a lab prints when memory runs out: host or GPU, the size of the allocation that failed (from
/// libtorch's message @p what), and which flags make the run smaller.
std::string out_of_memory_message(const std::string& what);

/// True when libtorch's message @p what says a host allocation failed: its CPU allocator reports that as a
/// plain c10::Error ("[enforce fail at alloc_cpu.cpp] ... DefaultCPUAllocator: can't allocate memory"),
/// not as an OutOfMemoryError; run_lab() answers both with out_of_memory_message() and exit 3.
bool is_host_allocation_failure(const std::string& what);

/// Adds an integer flag that must be at least @p minimum (CLI11 reports a violation as a usage error).
CLI::Option* add_int_flag(CLI::App& app, const std::string& name, int& value, const std::string& help, int minimum = 1);
/// add_int_flag() for a 64-bit value (a batch or sequence size).
CLI::Option* add_int_flag(CLI::App& app, const std::string& name, int64_t& value, const std::string& help,
                          int64_t minimum = 1);

/// Adds a floating-point flag that must be a finite number above @p above (NaN, inf and values at or
/// below @p above are usage errors, exit 2): the one validator every lab's real-valued flag uses.
CLI::Option* add_number_flag(CLI::App& app, const std::string& name, double& value, const std::string& help,
                             double above = 0.0);

/// Adds a random-seed flag: a whole number from 0 to 2^63 - 1. A negative or larger value is a usage
/// error, not silently wrapped into another seed.
CLI::Option* add_seed_flag(CLI::App& app, uint64_t& seed);

/// One convention for every lab's flags. A run starts from the lab's defaults, or under --quick from its
/// quick configuration (either adapted to the device by the lab); then every flag given on the command
/// line is set on top. So an explicit flag always wins over --quick, and --quick changes only what was
/// not given. The parser writes into parsed(), a Config holding the full run's defaults (what --help shows).
///
///     speedlabs::ConfigFlags<lab05::Config> flags;
///     flags.int_option(app, "--steps", &lab05::Config::steps, "training steps per mode");
///     ...
///     lab05::run(flags.configure(context, lab05::quick_config), ...);
template <class Config>
class ConfigFlags {
 public:
  ConfigFlags() = default;
  ConfigFlags(const ConfigFlags&) = delete;  // its rules point into this object
  ConfigFlags& operator=(const ConfigFlags&) = delete;

  /// Where the parser writes the flags' values.
  Config& parsed() { return parsed_; }

  /// A flag that sets the field @p member: added with its default shown; chain ->check() for its choices.
  template <class T>
  CLI::Option* option(CLI::App& app, const std::string& name, T Config::*member, const std::string& help) {
    return bind(app.add_option(name, parsed_.*member, help)->capture_default_str(), member);
  }
  /// An integer field that must be at least @p minimum (add_int_flag).
  template <class T>
  CLI::Option* int_option(CLI::App& app, const std::string& name, T Config::*member, const std::string& help,
                          T minimum = 1) {
    return bind(add_int_flag(app, name, parsed_.*member, help, minimum), member);
  }
  /// A real-valued field that must be finite and above @p above (add_number_flag).
  CLI::Option* number_option(CLI::App& app, const std::string& name, double Config::*member, const std::string& help,
                             double above = 0.0) {
    return bind(add_number_flag(app, name, parsed_.*member, help, above), member);
  }
  /// A flag whose value needs translating (a list, an enum): @p set runs on the config when it was given.
  CLI::Option* on_given(CLI::Option* flag, std::function<void(Config&)> set) {
    rules_.push_back([flag, set = std::move(set)](Config& config) {
      if (flag->count() > 0) set(config);
    });
    return flag;
  }
  /// The configuration to run: @p base with every flag that was given set on top.
  Config apply(Config base) const {
    for (const auto& rule : rules_) rule(base);
    return base;
  }
  /// The configuration a lab runs, chosen the same way in every lab: its @p quick_config with --quick, its
  /// defaults otherwise; then @p adapt (when given) fits those starting sizes to the chosen device; then every
  /// flag that was given is set on top, so a flag always wins.
  Config configure(const LabContext& context, const std::function<Config()>& quick_config,
                   const std::function<void(Config&, const LabContext&)>& adapt = {}) const {
    Config base = context.flags.quick ? quick_config() : Config{};
    if (adapt) adapt(base, context);
    return apply(std::move(base));
  }

  /// `--config`: the model size, with the same choices and help in every lab that has one.
  CLI::Option* model_option(CLI::App& app, std::string Config::*member) {
    return option(app, "--config", member, "model size: tiny (CPU-friendly) or gpt2 (124M)")
        ->check(CLI::IsMember({"tiny", "gpt2"}));
  }
  /// `--data-dir`: where the lab reads its data, with the same help in every lab that reads any.
  CLI::Option* data_dir_option(CLI::App& app, std::string Config::*member) {
    return option(app, "--data-dir", member, "data directory (default: $SPEEDLABS_DATA_DIR, then <repo>/data)");
  }

 private:
  template <class T>
  CLI::Option* bind(CLI::Option* flag, T Config::*member) {
    return on_given(flag, [this, member](Config& config) { config.*member = parsed_.*member; });
  }

  Config parsed_;
  std::vector<std::function<void(Config&)>> rules_;
};

}  // namespace speedlabs
