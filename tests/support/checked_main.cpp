// main() of a lab's outside check, checked_labNN (tests/support/checked.h says what it is for):
//
//   checked_labNN list                          the checked exercises, one name a line
//   checked_labNN produce EXERCISE SEED FD      the exercise's outputs on SEED's inputs, written to the open FD
//                                               (the graded tree: the student's code, in the sandbox)
//   checked_labNN check EXERCISE SEED FILE      recomputes them with this build's exercise (the reference tree)
//                                               and compares FILE, what `produce` wrote, with them (or, where
//                                               the exercise has a judge, what it judges of each)
//   checked_labNN list-timed                    the timed speed exercises: NAME CALLS FULL ZERO CPUS a line
//   checked_labNN time NAME SIDE FD             writes "ready" to FD, reads the seed from standard input, makes
//                                               the timed calls of SIDE (exercise, best or inputs) on the seed's
//                                               inputs, writes their outputs (call I's output X as "I.X") to FD
//                                               and closes it: the grader's clock runs from the seed to the end
//   checked_labNN check-timed NAME SEED FILE [BEST]
//                                               compares FILE, what `time NAME exercise` wrote, with the best's
//                                               outputs on the same inputs (the reference tree): BEST, what the
//                                               reference's `time NAME best` wrote on SEED, else computed here
//   checked_labNN list-raced                    the raced speed exercises: NAME FULL ZERO TARGET SEGMENT_STEPS
//                                               STEP_CAP a line
//   checked_labNN race NAME SIDE FD             writes "ready" to FD, reads the seed from standard input, then
//                                               per segment: SEGMENT_STEPS steps of SIDE (exercise or best) on the
//                                               seed's task, its weights written to FD, and a line read from
//                                               standard input: "go" for the next segment, anything else ends it
//   checked_labNN judge-raced NAME SEED         per path read from standard input (what `race` wrote for one
//                                               segment, in a file), the judged loss on SEED's task on a line:
//                                               a number, or "nan" and why (the reference tree)
//
// Exit codes: 0 produced / passed; 1 the exercise threw (produce) or an output differs (check: the first
// difference on stdout, one line); 2 a bad command line, a speed exercise that cannot be prepared here (its data
// missing) or a failure of the reference itself.
//
// FILE's format, written and read only here: a line "speedlabs-checked 1", then per output a line
// "NAME DTYPE NDIM SIZE..." and its elements' bytes (contiguous, this machine's byte order), then "end".
// FILE comes from the student's process, so it is read with a limit on every field.
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include <ATen/CPUGeneratorImpl.h>

#include "common/precision.h"
#include "tests/support/checked.h"

namespace speedlabs::checked {

int64_t draw_int(at::Generator& generator, int64_t low, int64_t high) {
  return torch::randint(low, high + 1, {1}, generator, torch::kLong).item<int64_t>();
}

std::vector<torch::Tensor> draw_attention_inputs(at::Generator& generator, int64_t max_heads) {
  const int64_t batch = draw_int(generator, 1, 2), heads = draw_int(generator, 1, max_heads);
  const int64_t length = draw_int(generator, 1, 96), head_size = draw_int(generator, 4, 32);
  std::vector<torch::Tensor> qkv;
  for (int i = 0; i < 3; ++i) qkv.push_back(torch::randn({batch, heads, length, head_size}, generator, torch::kFloat));
  return qkv;
}

torch::Tensor joined(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.detach().flatten());
  return torch::cat(flat);
}

// A lab whose checked.cpp times nothing (most of them) has no timed exercise, nor a raced one.
__attribute__((weak)) std::vector<Timed> timed() { return {}; }
__attribute__((weak)) std::vector<Raced> raced() { return {}; }

}  // namespace speedlabs::checked

namespace {

using speedlabs::checked::Exercise;
using speedlabs::checked::Outputs;
using speedlabs::checked::Raced;
using speedlabs::checked::Side;
using speedlabs::checked::Timed;
using speedlabs::checked::Tolerance;

constexpr const char* kMagic = "speedlabs-checked 1";
constexpr size_t kMaxLine = 512;  // a header line: a name, a dtype and up to 8 sizes
constexpr int64_t kMaxDims = 8;
constexpr int64_t kMaxBytes = int64_t{1} << 28;  // one output's elements (the grader caps the whole file lower)

const std::map<std::string, torch::ScalarType>& dtypes() {
  static const std::map<std::string, torch::ScalarType> known = {
      {"Float", torch::kFloat}, {"Double", torch::kDouble}, {"Half", torch::kHalf},   {"BFloat16", torch::kBFloat16},
      {"Long", torch::kLong},   {"Int", torch::kInt},       {"Short", torch::kShort}, {"Bool", torch::kBool}};
  return known;
}

void write_all(int fd, const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written <= 0) throw std::runtime_error("cannot write the outputs to the grader's pipe");
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void write_outputs(int fd, const Outputs& outputs) {
  std::string header = std::string(kMagic) + "\n";
  write_all(fd, header.data(), header.size());
  for (const auto& [name, value] : outputs) {
    const auto tensor = value.detach().to(torch::kCPU).contiguous();
    header = name + " " + std::string(c10::toString(tensor.scalar_type())) + " " + std::to_string(tensor.dim());
    for (const int64_t size : tensor.sizes()) header += " " + std::to_string(size);
    header += "\n";
    write_all(fd, header.data(), header.size());
    write_all(fd, tensor.data_ptr(), tensor.numel() * tensor.element_size());
  }
  write_all(fd, "end\n", 4);
}

// One header line of at most kMaxLine characters and its newline; nullopt at the end of the file or on a longer line.
std::optional<std::string> read_line(std::istream& in) {
  std::string line;
  char c = 0;
  while (in.get(c)) {
    if (c == '\n') return line;
    if (line.size() == kMaxLine) return std::nullopt;
    line += c;
  }
  return std::nullopt;  // the file ended inside the line
}

// The outputs in @p path; throws std::runtime_error with what is malformed.
Outputs read_outputs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in || in.peek() == std::char_traits<char>::eof())
    throw std::runtime_error("no outputs came back (the process ended before it wrote any)");
  if (read_line(in) != std::string(kMagic)) throw std::runtime_error("the outputs do not start with their header");
  Outputs outputs;
  while (true) {
    const auto line = read_line(in);
    if (!line) throw std::runtime_error("the outputs end early (did the process stop before it finished?)");
    if (*line == "end") return outputs;
    std::istringstream words(*line);
    std::string name, dtype;
    int64_t dims = -1;
    words >> name >> dtype >> dims;
    if (!words || !dtypes().count(dtype) || dims < 0 || dims > kMaxDims)
      throw std::runtime_error("a malformed output header: '" + *line + "'");
    std::vector<int64_t> sizes(dims);
    int64_t numel = 1;
    for (auto& size : sizes) {
      words >> size;
      if (!words || size < 0 || size > kMaxBytes) throw std::runtime_error("a malformed size in '" + *line + "'");
      numel *= size;
      if (numel > kMaxBytes) throw std::runtime_error("an output too large: '" + *line + "'");
    }
    auto tensor = torch::empty(sizes, dtypes().at(dtype));
    const int64_t bytes = numel * static_cast<int64_t>(tensor.element_size());
    if (bytes > kMaxBytes) throw std::runtime_error("an output too large: '" + *line + "'");
    in.read(static_cast<char*>(tensor.data_ptr()), bytes);
    if (in.gcount() != bytes) throw std::runtime_error("output '" + name + "' ends early");
    outputs.emplace_back(name, tensor);
  }
}

// The index of flat element @p flat of a tensor of @p sizes, as "[i, j, ...]".
std::string index_of(int64_t flat, c10::IntArrayRef sizes) {
  std::vector<int64_t> index(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    index[d] = sizes[d] ? flat % sizes[d] : 0;
    flat = sizes[d] ? flat / sizes[d] : 0;
  }
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d) text += (d ? ", " : "") + std::to_string(index[d]);
  return text + "]";
}

// Bit-exact equality as an integer view of the same width (NaN matches NaN; -0 and +0 differ).
torch::Tensor exact_matches(const torch::Tensor& got, const torch::Tensor& ref) {
  if (!got.is_floating_point()) return got.eq(ref);
  const auto bits = got.element_size() == 8 ? torch::kLong : got.element_size() == 4 ? torch::kInt : torch::kShort;
  return got.view(bits).eq(ref.view(bits)).logical_or(got.isnan().logical_and(ref.isnan()));
}

// "" when @p got matches @p ref within @p tolerance, else the first difference in words.
std::string compare(const std::string& name, const torch::Tensor& got, const torch::Tensor& ref, Tolerance tolerance) {
  if (got.scalar_type() != ref.scalar_type())
    return "output '" + name + "' is " + std::string(c10::toString(got.scalar_type())) + ", the reference's " +
           std::string(c10::toString(ref.scalar_type()));
  if (got.sizes() != ref.sizes()) {
    std::ostringstream text;
    text << "output '" << name << "' has shape " << got.sizes() << ", the reference's " << ref.sizes();
    return text.str();
  }
  const bool exact = tolerance.rtol == 0 && tolerance.atol == 0;
  torch::Tensor matches;
  if (exact) {
    matches = exact_matches(got, ref);
  } else {
    const auto g = got.to(torch::kDouble), r = ref.to(torch::kDouble);
    matches = (g - r)
                  .abs()
                  .le(tolerance.atol + tolerance.rtol * r.abs())
                  .logical_or(g.eq(r))
                  .logical_or(g.isnan().logical_and(r.isnan()));
  }
  const auto wrong = matches.logical_not().flatten();
  const int64_t count = wrong.sum().item<int64_t>();
  if (count == 0) return "";
  const int64_t first = wrong.nonzero()[0][0].item<int64_t>();
  std::ostringstream text;
  text.precision(9);
  text << "output '" << name << "': " << count << " of " << got.numel() << " elements differ from the reference's; the "
       << "first at " << index_of(first, got.sizes()) << ": got " << got.flatten()[first].item<double>()
       << ", the reference gives " << ref.flatten()[first].item<double>();
  if (exact) {
    text << " (must be exactly equal)";
  } else {
    text << " (allowed: " << tolerance.atol << " + " << tolerance.rtol << " x |reference|)";
  }
  return text.str();
}

int usage(const std::string& why) {
  std::cerr << "error: " << why
            << "\nusage: checked_labNN list | produce EXERCISE SEED FD | check EXERCISE SEED FILE | list-timed |"
               " time NAME SIDE FD | check-timed NAME SEED FILE [BEST] | list-raced | race NAME SIDE FD |"
               " judge-raced NAME SEED\n";
  return 2;
}

std::optional<uint64_t> parse_seed(const std::string& text) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(text);
}

// 0 when every output of @p got matches @p reference's (same names, dtypes, shapes, values within @p tolerance),
// else 1 with the first difference on stdout.
int compare_outputs(const Outputs& got, const Outputs& reference, Tolerance tolerance) {
  if (got.size() != reference.size()) {
    std::cout << got.size() << " outputs came back, the reference gives " << reference.size() << "\n";
    return 1;
  }
  for (size_t i = 0; i < reference.size(); ++i) {
    if (got[i].first != reference[i].first) {
      std::cout << "output " << i << " is named '" << got[i].first << "', the reference's '" << reference[i].first
                << "'\n";
      return 1;
    }
    const auto difference = compare(reference[i].first, got[i].second,
                                    reference[i].second.detach().to(torch::kCPU).contiguous(), tolerance);
    if (!difference.empty()) {
      std::cout << difference << "\n";
      return 1;
    }
  }
  std::cout << "passed\n";
  return 0;
}

std::optional<int> parse_fd(const std::string& text) {
  const auto fd = parse_seed(text);
  if (!fd || *fd > 1024 || ::fcntl(static_cast<int>(*fd), F_GETFD) == -1) return std::nullopt;
  return static_cast<int>(*fd);
}

// produce: the student's outputs into the grader's pipe.
int produce(const Exercise& exercise, at::Generator& generator, const std::string& fd_text) {
  const auto fd = parse_fd(fd_text);
  if (!fd) return usage("FD must be an open file descriptor");
  try {
    write_outputs(*fd, exercise.outputs(generator));
  } catch (const std::exception& error) {
    std::cerr << exercise.name << " threw: " << error.what() << "\n";
    return 1;
  }
  return 0;
}

// check: the reference's outputs on the same seed, compared with (or judged beside) the student's in @p path.
int check(const Exercise& exercise, uint64_t seed, const std::string& path) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  Outputs reference;
  try {
    reference = exercise.outputs(generator);
  } catch (const std::exception& error) {
    std::cerr << "the reference " << exercise.name << " threw: " << error.what() << "\n";
    return 2;
  }
  Outputs got;
  try {
    got = read_outputs(path);
  } catch (const std::exception& error) {
    std::cout << error.what() << "\n";
    return 1;
  }
  if (exercise.judge) {  // both sides judged from the same seed's inputs, here, outside the student's process
    try {
      auto judging = at::make_generator<at::CPUGeneratorImpl>(seed);
      reference = exercise.judge(judging, reference);
    } catch (const std::exception& error) {
      std::cerr << "judging the reference's " << exercise.name << " threw: " << error.what() << "\n";
      return 2;
    }
    try {
      auto judging = at::make_generator<at::CPUGeneratorImpl>(seed);
      got = exercise.judge(judging, got);
    } catch (const std::exception& error) {
      std::cout << "the outputs could not be judged: " << error.what() << "\n";
      return 1;
    }
  }
  return compare_outputs(got, reference, exercise.tolerance);
}

// The outputs of every call of @p timed on @p seed's inputs, call I's output X named "I.X".
Outputs timed_outputs(const Timed& timed, uint64_t seed, Side side) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  Outputs all;
  for (int64_t call = 0; call < timed.calls; ++call)
    for (auto& [name, value] : timed.call(generator, side)) all.emplace_back(std::to_string(call) + "." + name, value);
  return all;
}

// Says "ready" on @p fd and waits for the grader's seed on standard input: the inputs exist from then on.
uint64_t seed_after_ready(int fd) {
  write_all(fd, "ready\n", 6);
  const auto line = read_line(std::cin);
  const auto seed = line ? parse_seed(*line) : std::nullopt;
  if (!seed) throw std::runtime_error("no seed came on standard input");
  return *seed;
}

// time: "ready", then the seed from the grader, then the calls; the clock is the grader's, outside.
int time_calls(const Timed& timed, const std::string& side_word, const std::string& fd_text) {
  const std::map<std::string, Side> sides = {
      {"exercise", Side::exercise}, {"best", Side::best}, {"inputs", Side::inputs_only}};
  if (!sides.count(side_word)) return usage("SIDE must be exercise, best or inputs, not '" + side_word + "'");
  const auto fd = parse_fd(fd_text);
  if (!fd) return usage("FD must be an open file descriptor");
  try {
    write_outputs(*fd, timed_outputs(timed, seed_after_ready(*fd), sides.at(side_word)));
  } catch (const std::exception& error) {
    std::cerr << timed.name << " threw: " << error.what() << "\n";
    return 1;
  }
  ::close(*fd);  // the last byte is out: the grader's clock stops here, not after this process's teardown
  return 0;
}

// check-timed: the student's timed outputs against the best's on the same seed's inputs, read from @p best_path
// (the reference's own timed process wrote them) or, when it is empty, computed here.
int check_timed(const Timed& timed, uint64_t seed, const std::string& path, const std::string& best_path) {
  Outputs best;
  try {
    best = best_path.empty() ? timed_outputs(timed, seed, Side::best) : read_outputs(best_path);
  } catch (const std::exception& error) {
    std::cerr << "the best side of " << timed.name << " failed: " << error.what() << "\n";
    return 2;
  }
  try {
    return compare_outputs(read_outputs(path), best, timed.tolerance);
  } catch (const std::exception& error) {
    std::cout << error.what() << "\n";
    return 1;
  }
}

// @p run on the seed @p text gives; the usage (exit 2) when it is not one.
int with_seed(const std::string& text, const std::function<int(uint64_t)>& run) {
  const auto seed = parse_seed(text);
  if (!seed) return usage("SEED must be a whole number below 10^19, not '" + text + "'");
  return run(*seed);
}

// @p run on the speed exercise of @p all named @p name, once what it prepares is made (before "ready": outside
// the grader's timing); exit 2 with the message when there is none or it cannot be prepared (its data missing).
template <typename Speed>
int prepared(const std::vector<Speed>& all, const std::string& name, const std::function<int(const Speed&)>& run) {
  for (const auto& candidate : all) {
    if (candidate.name != name) continue;
    try {
      if (candidate.prepare) candidate.prepare();
    } catch (const std::exception& error) {
      std::cerr << "error: " << name << " cannot be prepared: " << error.what() << "\n";
      return 2;
    }
    return run(candidate);
  }
  return usage("no speed exercise '" + name + "'");
}

int timed_command(const std::vector<std::string>& args) {
  return prepared<Timed>(speedlabs::checked::timed(), args[1], [&](const Timed& timed) {
    if (args[0] == "time") return time_calls(timed, args[2], args[3]);
    return with_seed(args[2],
                     [&](uint64_t seed) { return check_timed(timed, seed, args[3], args.size() == 5 ? args[4] : ""); });
  });
}

// race: "ready", then the seed, then a segment at a time while the grader says "go"; the clock is the grader's, and
// between two segments the grader stops this process's whole sandbox.
int race_side(const Raced& raced, const std::string& side_word, const std::string& fd_text) {
  const std::map<std::string, Side> sides = {{"exercise", Side::exercise}, {"best", Side::best}};
  if (!sides.count(side_word)) return usage("SIDE must be exercise or best, not '" + side_word + "'");
  const auto fd = parse_fd(fd_text);
  if (!fd) return usage("FD must be an open file descriptor");
  try {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed_after_ready(*fd));
    const speedlabs::checked::Segment next = raced.start(generator, sides.at(side_word));
    for (int64_t steps = 0; steps < raced.step_cap; steps += raced.segment_steps) {
      write_outputs(*fd, next());
      if (read_line(std::cin) != std::string("go")) break;
    }
  } catch (const std::exception& error) {
    std::cerr << raced.name << " threw: " << error.what() << "\n";
    return 1;
  }
  ::close(*fd);
  return 0;
}

// judge-raced: the loss of each segment's weights, a line each, for as long as paths come.
int judge_raced(const Raced& raced, uint64_t seed) {
  std::string path;
  while (std::getline(std::cin, path)) {
    std::string why;
    double loss = std::nan("");
    try {
      const Outputs weights = read_outputs(path);
      auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
      loss = raced.loss(generator, weights);
    } catch (const std::exception& error) {
      why = error.what();
    }
    std::ostringstream line;
    line.precision(9);
    line << loss;
    if (!why.empty()) line << " " << why;
    std::cout << line.str() << std::endl;  // flushed: the grader waits for it
  }
  return 0;
}

int raced_command(const std::vector<std::string>& args) {
  return prepared<Raced>(speedlabs::checked::raced(), args[1], [&](const Raced& raced) {
    if (args[0] == "race") return race_side(raced, args[2], args[3]);
    return with_seed(args[2], [&](uint64_t seed) { return judge_raced(raced, seed); });
  });
}

}  // namespace

int main(int argc, char** argv) {
  speedlabs::prepare_vector_math();
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto exercises = speedlabs::checked::exercises();
  if (args.size() == 1 && args[0] == "list") {
    for (const auto& exercise : exercises) std::cout << exercise.name << "\n";
    return 0;
  }
  if (args.size() == 1 && args[0] == "list-timed") {
    for (const auto& timed : speedlabs::checked::timed())
      std::cout << timed.name << " " << timed.calls << " " << timed.full << " " << timed.zero << " " << timed.cpus
                << "\n";
    return 0;
  }
  if (args.size() == 1 && args[0] == "list-raced") {
    for (const auto& raced : speedlabs::checked::raced())
      std::cout << raced.name << " " << raced.full << " " << raced.zero << " " << raced.target << " "
                << raced.segment_steps << " " << raced.step_cap << "\n";
    return 0;
  }
  if ((args.size() == 4 && args[0] == "time") || ((args.size() == 4 || args.size() == 5) && args[0] == "check-timed"))
    return timed_command(args);
  if ((args.size() == 4 && args[0] == "race") || (args.size() == 3 && args[0] == "judge-raced"))
    return raced_command(args);
  if (args.size() != 4 || (args[0] != "produce" && args[0] != "check")) return usage("unknown command line");
  const Exercise* exercise = nullptr;
  for (const auto& candidate : exercises)
    if (candidate.name == args[1]) exercise = &candidate;
  if (!exercise) return usage("no checked exercise '" + args[1] + "'");
  return with_seed(args[2], [&](uint64_t seed) {
    if (args[0] == "check") return check(*exercise, seed, args[3]);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    return produce(*exercise, generator, args[3]);
  });
}
