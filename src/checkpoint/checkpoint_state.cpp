#include "trainhooks/checkpoint/checkpoint_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "trainhooks/errors.h"
#include "util/atomic_file.h"
#include "util/path.h"

namespace trainhooks {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFileName = "checkpoint";

// protobuf's CEscape (what text_format prints when as_utf8 is false): the usual backslash
// escapes, other bytes outside printable ASCII as three octal digits.
std::string c_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += fmt::format("\\{:03o}", c);
        } else {
          out += ch;
        }
    }
  }
  return out;
}

// Python's repr() of a float, which protobuf's text printer uses for doubles: the shortest text
// that reads back exactly, with ".0" on integral values.
std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  CheckpointState parse() {
    CheckpointState state;
    bool have_model_path = false;
    for (skip_space(); pos_ < text_.size(); skip_space()) {
      std::string field = identifier();
      skip_space();
      expect(':');
      skip_space();
      if (field == "model_checkpoint_path") {
        state.model_checkpoint_path = string_value();
        have_model_path = true;
      } else if (field == "all_model_checkpoint_paths") {
        state.all_model_checkpoint_paths.push_back(string_value());
      } else if (field == "all_model_checkpoint_timestamps") {
        state.all_model_checkpoint_timestamps.push_back(number_value());
      } else if (field == "last_preserved_timestamp") {
        state.last_preserved_timestamp = number_value();
      } else {
        fail(fmt::format("unknown field '{}'", field));
      }
      skip_space();
      if (pos_ < text_.size() && (text_[pos_] == ',' || text_[pos_] == ';')) ++pos_;
    }
    // No final newline is required: TensorFlow reads state files without one (or with trailing
    // spaces) too. Truncation still shows where the structure does (a string cut open, fewer time
    // stamps than paths); a number cut short at the very end cannot be told from a shorter one,
    // which is why every write of the state file is atomic.
    if (!have_model_path || state.model_checkpoint_path.empty()) {
      throw DataLossError(fmt::format(
          "Invalid checkpoint state loaded from {}: model_checkpoint_path is missing", source_));
    }
    // TensorFlow refuses to write such a state; the time stamps come last, so a file that lost
    // its last lines has fewer.
    const size_t paths = state.all_model_checkpoint_paths.size();
    const size_t times = state.all_model_checkpoint_timestamps.size();
    if (times != 0 && times != paths) {
      fail(
          fmt::format("{} all_model_checkpoint_paths but {} all_model_checkpoint_timestamps (one "
                      "per path): the file is truncated",
                      paths, times));
    }
    return state;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    // At the end of the text, the place is after its last token, not on a final empty line.
    size_t at = std::min(pos_, text_.size());
    if (at == text_.size())
      while (at > 0 && std::isspace(static_cast<unsigned char>(text_[at - 1]))) --at;
    size_t line = 1;
    for (size_t i = 0; i < at; ++i) line += text_[i] == '\n';
    throw DataLossError(
        fmt::format("Cannot parse the checkpoint state {} (line {}): {}", source_, line, what));
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else {
        return;
      }
    }
  }

  void expect(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) fail(fmt::format("expected '{}'", c));
    ++pos_;
  }

  std::string identifier() {
    size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    if (pos_ == start) fail("expected a field name");
    return std::string(text_.substr(start, pos_ - start));
  }

  // One or more adjacent quoted strings, concatenated (as protobuf's tokenizer does).
  std::string string_value() {
    std::string out;
    bool any = false;
    while (pos_ < text_.size() && (text_[pos_] == '"' || text_[pos_] == '\'')) {
      any = true;
      char quote = text_[pos_++];
      while (true) {
        if (pos_ >= text_.size() || text_[pos_] == '\n') fail("unterminated string");
        char c = text_[pos_++];
        if (c == quote) break;
        if (c != '\\') {
          out += c;
          continue;
        }
        if (pos_ >= text_.size()) fail("unterminated escape");
        char e = text_[pos_++];
        switch (e) {
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'a':
            out += '\a';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'v':
            out += '\v';
            break;
          case '\\':
          case '\'':
          case '"':
          case '?':
            out += e;
            break;
          case 'x': {
            int value = 0, digits = 0;
            while (digits < 2 && pos_ < text_.size() &&
                   std::isxdigit(static_cast<unsigned char>(text_[pos_]))) {
              value = value * 16 + std::stoi(std::string(1, text_[pos_++]), nullptr, 16);
              ++digits;
            }
            if (digits == 0) fail("invalid \\x escape");
            out += static_cast<char>(value);
            break;
          }
          default:
            if (e >= '0' && e <= '7') {
              int value = e - '0', digits = 1;
              while (digits < 3 && pos_ < text_.size() && text_[pos_] >= '0' &&
                     text_[pos_] <= '7') {
                value = value * 8 + (text_[pos_++] - '0');
                ++digits;
              }
              out += static_cast<char>(value);
            } else {
              fail(fmt::format("invalid escape '\\{}'", e));
            }
        }
      }
      skip_space();
    }
    if (!any) fail("expected a quoted string");
    return out;
  }

  double number_value() {
    size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' ||
            text_[pos_] == '-' || text_[pos_] == '+')) {
      ++pos_;
    }
    std::string token(text_.substr(start, pos_ - start));
    std::string lower;
    for (char c : token) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "inf" || lower == "infinity") return INFINITY;
    if (lower == "-inf" || lower == "-infinity") return -INFINITY;
    if (lower == "nan") return NAN;
    if (!lower.empty() && lower.back() == 'f') lower.pop_back();  // protobuf's "1.5f"
    char* end = nullptr;
    double v = std::strtod(lower.c_str(), &end);
    if (lower.empty() || end != lower.c_str() + lower.size())
      fail(fmt::format("expected a number, got '{}'", token));
    return v;
  }

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
};

// os.path.relpath: both made absolute and normal first.
std::string relative_to(const std::string& path, const std::string& dir) {
  fs::path p = fs::absolute(fs::path(path)).lexically_normal();
  fs::path d = fs::absolute(fs::path(dir.empty() ? "." : dir)).lexically_normal();
  fs::path rel = p.lexically_relative(d);
  return rel.empty() ? path : rel.string();
}

}  // namespace

std::string checkpoint_state_path(const std::string& checkpoint_dir) {
  return (fs::path(checkpoint_dir.empty() ? "." : checkpoint_dir) / kStateFileName).string();
}

std::string checkpoint_state_to_text(const CheckpointState& state) {
  std::string out;
  if (!state.model_checkpoint_path.empty()) {
    out += fmt::format("model_checkpoint_path: \"{}\"\n", c_escape(state.model_checkpoint_path));
  }
  for (const auto& p : state.all_model_checkpoint_paths) {
    out += fmt::format("all_model_checkpoint_paths: \"{}\"\n", c_escape(p));
  }
  for (double t : state.all_model_checkpoint_timestamps) {
    out += fmt::format("all_model_checkpoint_timestamps: {}\n", python_float(t));
  }
  if (state.last_preserved_timestamp != 0) {
    out +=
        fmt::format("last_preserved_timestamp: {}\n", python_float(state.last_preserved_timestamp));
  }
  return out;
}

CheckpointState parse_checkpoint_state(std::string_view text, std::string_view source) {
  return Parser(text, source).parse();
}

std::optional<CheckpointState> get_checkpoint_state(const std::string& checkpoint_dir,
                                                    const Env& env) {
  const std::string file = checkpoint_state_path(checkpoint_dir);
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (!fs::exists(status)) return std::nullopt;
  if (fs::is_directory(status)) {
    throw FileError(
        fmt::format("Cannot read the checkpoint state '{}': it is a directory, not a file", file));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw FileError(
        fmt::format("Cannot open the checkpoint state '{}': {}", file, std::strerror(errno)));
  }
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    in.setstate(std::ios::badbit);  // libstdc++ throws from the buffer on a read error
  }
  if (in.bad()) throw FileError(fmt::format("Cannot read the checkpoint state '{}'", file));
  CheckpointState state = parse_checkpoint_state(text, file);

  const fs::path dir(checkpoint_dir);
  std::vector<std::string> moved;  // file names taken from beside the state file
  std::string moved_from;
  // A checkpoint is there when its file is, or one of its format's companion files
  // `<checkpoint>.<suffix>` (the training-state file of the default format): any format's, so that
  // this file reader needs to know none.
  auto exists = [](const fs::path& checkpoint) {
    std::error_code ignored;
    if (fs::exists(checkpoint, ignored)) return true;
    const std::string companion = checkpoint.filename().string() + ".";
    for (const auto& entry : fs::directory_iterator(checkpoint.parent_path(), ignored))
      if (entry.path().filename().string().starts_with(companion)) return true;
    return false;
  };
  auto resolve = [&](std::string& p) {
    const fs::path path(p);
    if (!path.is_absolute()) {
      p = (dir / path).string();
      return;
    }
    // An absolute path elsewhere: written by an older trainhooks (or TensorFlow's Saver) in a
    // directory since moved or copied. The file beside the state file is the one meant; for a copy
    // whose original still exists, using the original's would verify, restore from and delete the
    // wrong files.
    const fs::path here(checkpoint_dir.empty() ? "." : checkpoint_dir);
    const fs::path beside = here / path.filename();
    if (path.filename().empty() ||
        internal::same_path(path.parent_path().string(), here.string()) || !exists(beside)) {
      return;
    }
    std::error_code ignored;
    if (fs::equivalent(path, beside, ignored)) return;  // the same file through a symbolic link
    if (moved_from.empty()) moved_from = path.parent_path().string();
    if (std::find(moved.begin(), moved.end(), path.filename().string()) == moved.end())
      moved.push_back(path.filename().string());
    p = beside.string();
  };
  resolve(state.model_checkpoint_path);
  for (auto& p : state.all_model_checkpoint_paths) resolve(p);
  if (!moved.empty()) {
    env.warning(fmt::format(
        "Checkpoint state '{}' lists checkpoints in another directory, '{}': using the files of "
        "the same names beside it (the directory was moved or copied): {}",
        file, moved_from, fmt::join(moved, ", ")));
  }
  return state;
}

void update_checkpoint_state(const std::string& save_dir, CheckpointState state,
                             bool save_relative_paths) {
  if (state.model_checkpoint_path.empty()) {
    throw InvalidArgument("update_checkpoint_state: model_checkpoint_path must not be empty");
  }
  if (state.all_model_checkpoint_paths.empty() ||
      state.all_model_checkpoint_paths.back() != state.model_checkpoint_path) {
    state.all_model_checkpoint_paths.push_back(state.model_checkpoint_path);
  }
  if (!state.all_model_checkpoint_timestamps.empty() &&
      state.all_model_checkpoint_timestamps.size() != state.all_model_checkpoint_paths.size()) {
    throw InvalidArgument(fmt::format(
        "update_checkpoint_state: Checkpoint timestamps, if provided, must match checkpoint paths "
        "(got {} paths and {} timestamps)",
        state.all_model_checkpoint_paths.size(), state.all_model_checkpoint_timestamps.size()));
  }
  const std::string file = checkpoint_state_path(save_dir);
  auto same_file = [&](const std::string& p) {
    return fs::absolute(fs::path(p)).lexically_normal() ==
           fs::absolute(fs::path(file)).lexically_normal();
  };
  if (same_file(state.model_checkpoint_path)) {
    throw InvalidArgument(
        fmt::format("Save path '{}' conflicts with path used for checkpoint state.  Please use a "
                    "different save path.",
                    state.model_checkpoint_path));
  }
  // TensorFlow's rule: relative to the directory when asked, or when the directory is relative
  // (then the paths, relative to the working directory, are rewritten relative to it).
  const bool dir_is_relative = !fs::path(save_dir).is_absolute();
  auto rewrite = [&](std::string& p) {
    const bool abs = fs::path(p).is_absolute();
    if ((save_relative_paths && abs) || (dir_is_relative && !abs)) p = relative_to(p, save_dir);
  };
  rewrite(state.model_checkpoint_path);
  for (auto& p : state.all_model_checkpoint_paths) rewrite(p);
  internal::write_file_atomically(file, checkpoint_state_to_text(state));
}

}  // namespace trainhooks
