// tokenize: GPT-2 token ids of a text, or the text of token ids. Run as `./lab run tokenize ...`.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/errors.h"
#include "datasets/data_files.h"
#include "datasets/gpt2_tokenizer.h"

namespace {

using speedlabs::UsageError;

// Far more than any text a lab reads (tiny shakespeare is 1.1 MB), and a clear stop for an endless input
// such as /dev/zero before it fills the memory.
constexpr size_t kMaxInputBytes = size_t{256} << 20;

// The whole of @p in; UsageError when it is larger than kMaxInputBytes or cannot be read.
std::string read_bounded(std::istream& in, const std::string& name) {
  std::string bytes;
  std::array<char, 1 << 16> chunk;
  while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
    if (bytes.size() + static_cast<size_t>(in.gcount()) > kMaxInputBytes)
      throw UsageError(name + " is larger than 256 MiB, the most tokenize reads: split it into parts");
    bytes.append(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw UsageError("could not read " + name);
  return bytes;
}

std::string read_input(const std::string& file) {
  if (file == "-") {
    // A closed standard input reads as an empty text: say so instead of printing no tokens.
    if (::fcntl(STDIN_FILENO, F_GETFD) == -1)
      throw UsageError("standard input is closed: give a FILE, or send the text to tokenize through a pipe");
    return read_bounded(std::cin, "standard input");
  }
  std::error_code error;  // a folder opens as a stream that reads nothing: not an empty text
  if (std::filesystem::is_directory(file, error)) throw UsageError("'" + file + "' is a folder, not a file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError("could not read '" + file + "'");
  return read_bounded(in, "'" + file + "'");
}

// Whitespace-separated decimal ids; anything else is a usage error that says where.
std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    // Digits only: stoll alone would also take "+5", " 5" or "5e3"'s prefix.
    const bool digits = word.size() <= 9 && word.find_first_not_of("0123456789") == std::string::npos;
    const long long value = digits ? std::stoll(word) : -1;
    if (value < 0 || value >= datasets::GPT2Tokenizer::kVocabSize)
      throw UsageError("token " + std::to_string(ids.size() + 1) + " is '" + word +
                       "': expected a GPT-2 token id, an integer from 0 to 50256");
    ids.push_back(static_cast<int32_t>(value));
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokenize: GPT-2 tokens (the same as tiktoken's gpt2) of a text, and back"};
  std::string data_dir;
  std::string file;
  bool count_only = false;
  bool allow_special = false;
  app.add_option("--data-dir", data_dir, "data directory (default: $SPEEDLABS_DATA_DIR, else <checkout>/data)");
  app.require_subcommand(1);
  CLI::App* encode = app.add_subcommand("encode", "print the token ids of FILE, separated by spaces");
  encode->add_option("FILE", file, "text file (at most 256 MiB), or - for standard input")->required();
  encode->add_flag("--count", count_only, "print only the number of tokens");
  encode->add_flag("--allow-special", allow_special, "turn the text <|endoftext|> into token 50256");
  CLI::App* decode = app.add_subcommand("decode", "print the text of the whitespace-separated token ids in FILE");
  decode->add_option("FILE", file, "file of ids (at most 256 MiB), or - for standard input")->required();
  try {
    // CLI11 calls any unknown word "A subcommand is required"; name the word instead.
    for (int i = 1; i < argc; ++i) {
      const std::string word = argv[i];
      if (word == "--data-dir") {
        ++i;
        continue;
      }
      if (word.rfind("-", 0) == 0) continue;
      if (word != "encode" && word != "decode") {
        std::cerr << "tokenize: error: unknown command '" << word << "': use encode or decode (--help)\n";
        return speedlabs::kExitUsage;
      }
      break;
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? speedlabs::kExitOk : speedlabs::kExitUsage;
  }

  try {
    const auto tokenizer = datasets::GPT2Tokenizer::load(datasets::resolve_data_dir(data_dir));
    const std::string input = read_input(file);
    if (encode->parsed()) {
      const std::vector<int32_t> ids =
          allow_special ? tokenizer.encode_allowing_special(input) : tokenizer.encode(input);
      if (count_only) {
        std::cout << ids.size() << "\n";
      } else {
        std::string line;
        for (size_t i = 0; i < ids.size(); ++i) (line += i ? " " : "") += std::to_string(ids[i]);
        std::cout << line << "\n";
      }
    } else {
      std::cout << tokenizer.decode(parse_ids(input));
    }
    std::cout.flush();
    if (!std::cout) throw speedlabs::RuntimeFailure("could not write the output");
    return speedlabs::kExitOk;
  } catch (const UsageError& e) {
    std::cerr << "tokenize: error: " << e.what() << "\n";
    return speedlabs::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "tokenize: error: " << e.what() << "\n";
    return speedlabs::kExitRuntime;
  }
}
