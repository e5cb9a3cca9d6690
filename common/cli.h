/// @file cli.h
/// @brief The flags every lab shares and the one main() wrapper that turns outcomes into exit codes.
///
/// Parsing is CLI11's (a maintained, header-only library with validators and generated --help).
#pragma once
#include <c10/core/Device.h>
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
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

/// A CLI11 check that an integer flag is a whole number of at least @p minimum that fits its type: a value
/// beyond the type's range (`--chunk 99999999999999999999`) is a usage error, never clamped to the largest
/// value (CLI11 reads a 64-bit integer with strtoll, which saturates), and neither is a fraction or a word.
template <class T>
CLI::Validator at_least(T minimum) {
  static_assert(std::is_integral_v<T>, "at_least checks whole-number flags");
  const std::string range = "from " + std::to_string(minimum) + " to " + std::to_string(std::numeric_limits<T>::max());
  return CLI::Validator(
      [minimum, range](std::string& text) -> std::string {
        T parsed{};
        const char* end = text.data() + text.size();
        const char* start = text.data() + (text.size() > 1 && text[0] == '+' ? 1 : 0);
        const auto [stop, error] = std::from_chars(start, end, parsed);
        if (error == std::errc::result_out_of_range)
          return "'" + text + "' is out of range: give a whole number " + range;
        if (error != std::errc() || stop != end || start == end) return "'" + text + "' is not a whole number";
        if (parsed < minimum) return "'" + text + "' must be a whole number " + range;
        return "";
      },
      "INT " + range);
}

/// A CLI11 check that a real-valued flag is a finite number above @p above: NaN, inf and values at or below
/// @p above are usage errors (exit 2). The one check every lab's real-valued flag uses.
CLI::Validator finite_above(double above = 0.0);

/// A CLI11 check that a random seed is a whole number from 0 to 2^63 - 1: a negative or larger value is a
/// usage error, not silently wrapped into another seed.
CLI::Validator whole_seed();

/// One knob of a lab's Config, seen without its type: what Knobs needs of every knob.
template <class Config>
class AnyKnob {
 public:
  virtual ~AnyKnob() = default;
  /// The flag, or "" for a setting that only --quick changes.
  virtual const std::string& name() const = 0;
  /// What the flag sets, without its values.
  virtual const std::string& help() const = 0;
  /// Sets the knob's quick value, if it has one, on @p config.
  virtual void set_quick(Config& config) const = 0;
  /// The knob's field of @p config as its flag would be written.
  virtual std::string shown(const Config& config) const = 0;
  /// Adds the flag to @p app with @p help, its parser starting from @p defaults; returns what sets the field
  /// of a configuration when the flag was given.
  virtual std::function<void(Config&)> add_flag(CLI::App& app, const std::string& help,
                                                const Config& defaults) const = 0;
};

/// One knob of a lab's Config, declared once in the lab's table (Knobs): its flag, its help, how it reads and
/// writes its field as the type @p T the flag parses, its value under --quick and the CLI11 checks on the flag.
template <class Config, class T>
class Knob final : public AnyKnob<Config> {
 public:
  using Get = std::function<T(const Config&)>;  ///< the field as the flag's type
  using Set = std::function<void(Config&, T)>;  ///< sets the field from the flag's type

  /// A knob named @p name (the flag, or "") with @p help, read by @p get and written by @p set.
  Knob(std::string name, std::string help, Get get, Set set)
      : name_(std::move(name)), help_(std::move(help)), get_(std::move(get)), set_(std::move(set)) {}

  /// Under --quick the field starts at @p value instead of its default.
  Knob& quick(T value) {
    quick_ = std::move(value);
    return *this;
  }
  /// Adds a CLI11 check on the flag's text (a range, a set of choices): a violation is a usage error.
  Knob& check(CLI::Validator validator) {
    checks_.push_back(std::move(validator));
    return *this;
  }

  const std::string& name() const override { return name_; }
  const std::string& help() const override { return help_; }
  void set_quick(Config& config) const override {
    if (quick_) set_(config, *quick_);
  }
  std::string shown(const Config& config) const override {
    if constexpr (kFlagType) {
      return CLI::detail::to_string(get_(config));
    } else {
      return "";  // a setting without a flag (a whole timing) is never shown
    }
  }
  std::function<void(Config&)> add_flag(CLI::App& app, const std::string& help, const Config& defaults) const override {
    if constexpr (kFlagType) {
      auto value = std::make_shared<T>(get_(defaults));
      CLI::Option* flag = app.add_option(name_, *value, help);
      for (const auto& validator : checks_) flag->check(validator);
      return [flag, value, set = set_](Config& config) {
        if (flag->count() > 0) set(config, *value);
      };
    } else {
      return [](Config&) {};  // Knobs adds no flag for a setting without a name
    }
  }

 private:
  // What a flag can parse and --help can show: a number or a text. Anything else is a setting without a flag.
  static constexpr bool kFlagType = std::is_arithmetic_v<T> || std::is_same_v<T, std::string>;

  std::string name_, help_;
  Get get_;
  Set set_;
  std::optional<T> quick_;
  std::vector<CLI::Validator> checks_;
};

/// A lab's knobs, each declared once: from this table come its flags, their help (with each default and
/// --quick value, generated), and the configuration a run gets. A run starts from the defaults (base(), which
/// is Config{}), or under --quick from the quick values; then each device adaptation that applies changes
/// those starting values; then every flag given on the command line is set on top. So an explicit flag always
/// wins over --quick, in either order, and --quick changes only what was not given.
///
///     speedlabs::Knobs<Config> knobs;
///     knobs.flag("--steps", "training steps per mode", &Config::steps).quick(15).check(speedlabs::at_least(1));
///     knobs.setting([](auto& c) -> auto& { return c.timing.warmup; }).quick(1);  // no flag: --quick only
template <class Config>
class Knobs {
 public:
  /// Changes a run's starting values, full or quick (the bool), on the devices it applies to.
  using Adapt = std::function<void(Config&, bool)>;

  /// A flag that sets @p field: a pointer to a member, or for a nested field an accessor such as
  /// `[](auto& c) -> auto& { return c.timing.repeats; }`.
  template <class Field>
  auto& flag(std::string name, std::string help, Field field) {
    using T = std::remove_cv_t<std::remove_reference_t<std::invoke_result_t<Field, Config&>>>;
    return add(std::make_shared<Knob<Config, T>>(
        std::move(name), std::move(help), [field](const Config& c) -> T { return std::invoke(field, c); },
        [field](Config& c, T value) { std::invoke(field, c) = std::move(value); }));
  }
  /// A flag whose field holds its text translated (a list, an enum): @p get writes the field as the flag's
  /// text, @p set reads the text into the field.
  template <class T>
  Knob<Config, T>& flag(std::string name, std::string help, typename Knob<Config, T>::Get get,
                        typename Knob<Config, T>::Set set) {
    return add(std::make_shared<Knob<Config, T>>(std::move(name), std::move(help), std::move(get), std::move(set)));
  }
  /// A setting with no flag, declared for its quick value only (the timing of a variant, say).
  template <class Field>
  auto& setting(Field field) {
    return flag("", "", std::move(field));
  }

  /// `--config`: the model size, with the same choices and help in every lab that has one.
  Knob<Config, std::string>& model_flag(std::string Config::*member) {
    return flag("--config", "model size: tiny (CPU-friendly) or gpt2 (124M)", member)
        .check(CLI::IsMember({"tiny", "gpt2"}));
  }
  /// `--data-dir`: where the lab reads its data, with the same help in every lab that reads any.
  Knob<Config, std::string>& data_dir_flag(std::string Config::*member) {
    return flag("--data-dir", "data directory (default: $SPEEDLABS_DATA_DIR, then <repo>/data)", member);
  }
  /// `--seed`: the random seed of the lab, a whole number (whole_seed()).
  Knob<Config, uint64_t>& seed_flag(uint64_t Config::*member) {
    return flag("--seed", "random seed", member).check(whole_seed());
  }

  /// On the devices @p applies accepts (@p where says which, for --help: "on a GPU"), @p adapt changes the
  /// starting values of a run, full or quick. --help shows the values it gives where they differ.
  void adapt(std::string where, std::function<bool(const c10::Device&)> applies, Adapt adapt) {
    adaptations_.push_back({std::move(where), std::move(applies), std::move(adapt)});
  }

  /// The configuration every run starts from, Config{}; a program may change it (the Python it was built with).
  Config& base() { return base_; }
  /// The defaults with every quick value set: what --quick starts from, before any device adaptation.
  Config quick() const {
    Config config = base_;
    for (const auto& knob : knobs_) knob->set_quick(config);
    return config;
  }
  /// The starting values of a run on @p device, full or @p quick, before any flag is set.
  Config start(bool quick, const c10::Device& device) const {
    Config config = quick ? this->quick() : base_;
    for (const auto& adaptation : adaptations_) {
      if (adaptation.applies(device)) adaptation.adapt(config, quick);
    }
    return config;
  }

  /// Adds every knob that has a flag to @p app, its help ending in its values: "(default D; --quick: Q)".
  void add_flags(CLI::App& app) {
    for (const auto& knob : knobs_) {
      if (!knob->name().empty()) set_given_.push_back(knob->add_flag(app, knob->help() + values(*knob), base_));
    }
  }
  /// The configuration a lab runs: start() for the chosen device and --quick, with every flag given on top.
  Config configure(const LabContext& context) const {
    Config config = start(context.flags.quick, context.device);
    for (const auto& set_given : set_given_) set_given(config);
    return config;
  }

 private:
  struct Adaptation {
    std::string where;
    std::function<bool(const c10::Device&)> applies;
    Adapt adapt;
  };

  template <class T>
  Knob<Config, T>& add(std::shared_ptr<Knob<Config, T>> knob) {
    knobs_.push_back(knob);
    return *knob;
  }

  // " (default D; on a GPU: D'; --quick: Q; --quick on a GPU: Q')", the adapted values only where they differ;
  // nothing for a flag that is empty however the run starts (an output path).
  std::string values(const AnyKnob<Config>& knob) const {
    const auto text = [](const std::string& shown) { return shown.empty() ? std::string("none") : shown; };
    const Config quick = this->quick();
    std::string full = "default " + text(knob.shown(base_)), quick_text = "--quick: " + text(knob.shown(quick));
    for (const auto& adaptation : adaptations_) {
      Config adapted_full = base_, adapted_quick = quick;
      adaptation.adapt(adapted_full, false);
      adaptation.adapt(adapted_quick, true);
      if (knob.shown(adapted_full) != knob.shown(base_)) {
        full += "; " + adaptation.where + ": " + text(knob.shown(adapted_full));
      }
      if (knob.shown(adapted_quick) != knob.shown(quick)) {
        quick_text += "; --quick " + adaptation.where + ": " + text(knob.shown(adapted_quick));
      }
    }
    const std::string all = full + "; " + quick_text;
    return all == "default none; --quick: none" ? "" : " (" + all + ")";
  }

  Config base_{};
  std::vector<std::shared_ptr<AnyKnob<Config>>> knobs_;
  std::vector<Adaptation> adaptations_;
  std::vector<std::function<void(Config&)>> set_given_;
};

}  // namespace speedlabs
