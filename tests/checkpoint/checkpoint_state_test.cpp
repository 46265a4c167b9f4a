#include "trainhooks/checkpoint/checkpoint_state.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
namespace fs = std::filesystem;

namespace checkpoint_state_test {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(CheckpointStateTest, PrintsProtobufTextFormatInFieldOrder) {
  th::CheckpointState s;
  s.model_checkpoint_path = "/r/model.ckpt-20";
  s.all_model_checkpoint_paths = {"/r/model.ckpt-10", "/r/model.ckpt-20"};
  s.all_model_checkpoint_timestamps = {1484695987.209386, 1000000000.0};
  s.last_preserved_timestamp = 1e9 - 1;
  EXPECT_EQ(th::checkpoint_state_to_text(s),
            "model_checkpoint_path: \"/r/model.ckpt-20\"\n"
            "all_model_checkpoint_paths: \"/r/model.ckpt-10\"\n"
            "all_model_checkpoint_paths: \"/r/model.ckpt-20\"\n"
            "all_model_checkpoint_timestamps: 1484695987.209386\n"
            "all_model_checkpoint_timestamps: 1000000000.0\n"
            "last_preserved_timestamp: 999999999.0\n");
}

TEST(CheckpointStateTest, LeavesOutZeroAndEmptyFields) {
  th::CheckpointState s;
  s.model_checkpoint_path = "model.ckpt";
  s.all_model_checkpoint_paths = {"model.ckpt"};
  EXPECT_EQ(th::checkpoint_state_to_text(s),
            "model_checkpoint_path: \"model.ckpt\"\nall_model_checkpoint_paths: \"model.ckpt\"\n");
}

TEST(CheckpointStateTest, EscapesAndParsesBackEveryByte) {
  th::CheckpointState s;
  std::string odd = "a\"b'c\\d\ne\tf\x01g\xc3\xa9";
  s.model_checkpoint_path = odd;
  s.all_model_checkpoint_paths = {odd};
  s.all_model_checkpoint_timestamps = {0.1};
  const std::string text = th::checkpoint_state_to_text(s);
  EXPECT_NE(text.find(R"(a\"b\'c\\d\ne\tf\001g\303\251)"), std::string::npos) << text;
  EXPECT_EQ(th::parse_checkpoint_state(text), s);
}

TEST(CheckpointStateTest, ParsesWhatOtherWritersProduce) {
  // Any field order, comments, single quotes, adjacent strings, integers and exponents.
  auto s = th::parse_checkpoint_state(
      "# written by hand\n"
      "all_model_checkpoint_paths: 'model.ckpt-1'\n"
      "all_model_checkpoint_paths: \"model.\" \"ckpt-2\"\n"
      "model_checkpoint_path: \"model.ckpt-2\"\n"
      "all_model_checkpoint_timestamps: 1\n"
      "all_model_checkpoint_timestamps: 1.5e9\n");
  EXPECT_EQ(s.model_checkpoint_path, "model.ckpt-2");
  EXPECT_EQ(s.all_model_checkpoint_paths,
            (std::vector<std::string>{"model.ckpt-1", "model.ckpt-2"}));
  EXPECT_EQ(s.all_model_checkpoint_timestamps, (std::vector<double>{1.0, 1.5e9}));
  EXPECT_EQ(s.last_preserved_timestamp, 0.0);
}

TEST(CheckpointStateTest, RejectsWhatIsNotACheckpointState) {
  for (const char* bad :
       {"model_checkpoint_path: \"a\"\nbogus_field: 1\n", "model_checkpoint_path \"a\"\n",
        "model_checkpoint_path: \"unterminated\n", "all_model_checkpoint_paths: \"a\"\n",
        "model_checkpoint_path: \"a\"\nall_model_checkpoint_timestamps: abc\n", ""}) {
    try {
      th::parse_checkpoint_state(bad, "/r/checkpoint");
      ADD_FAILURE() << "parsed: " << bad;
    } catch (const th::DataLossError& e) {
      EXPECT_NE(std::string(e.what()).find("/r/checkpoint"), std::string::npos) << e.what();
    }
  }
}

TEST(CheckpointStateTest, ParseErrorsNameTheLineOfTheFault) {
  auto message = [](const char* text) {
    return th::testing::error_message<th::DataLossError>(
        [&] { th::parse_checkpoint_state(text, "/r/checkpoint"); });
  };
  EXPECT_EQ(message("garbage\n"),
            "Cannot parse the checkpoint state /r/checkpoint (line 1): expected ':'");
  EXPECT_EQ(message("garbage"),
            "Cannot parse the checkpoint state /r/checkpoint (line 1): expected ':'");
  EXPECT_EQ(
      message("model_checkpoint_path: \"a\"\n\nbogus_field: 1\n"),
      "Cannot parse the checkpoint state /r/checkpoint (line 3): unknown field 'bogus_field'");
}

// TF's checkpoint_management_test.py CheckpointStateTest.testCheckPointCompletesRelativePaths:
// TensorFlow's own text (indented, relative "./" paths, no final newline, trailing spaces) parses,
// and relative paths are completed with the directory.
TEST(CheckpointStateTest, CheckPointCompletesRelativePaths) {
  th::testing::TempDir dir;
  const std::string state =
      "\n"
      "        model_checkpoint_path: \"./model.ckpt-687529\"\n"
      "        all_model_checkpoint_paths: \"./model.ckpt-687500\"\n"
      "        all_model_checkpoint_paths: \"./model.ckpt-687529\"\n"
      "        ";
  write_text(dir.file("checkpoint"), state);
  auto ckpt = th::get_checkpoint_state(dir.path());
  ASSERT_TRUE(ckpt);
  EXPECT_EQ(ckpt->model_checkpoint_path, dir.path() + "/./model.ckpt-687529");
  EXPECT_EQ(ckpt->all_model_checkpoint_paths,
            (std::vector<std::string>{dir.path() + "/./model.ckpt-687500",
                                      dir.path() + "/./model.ckpt-687529"}));
  // The last line without its newline, as other writers leave it.
  write_text(dir.file("checkpoint"), "model_checkpoint_path: \"model.ckpt-3\"");
  EXPECT_EQ(th::get_checkpoint_state(dir.path())->model_checkpoint_path,
            dir.path() + "/model.ckpt-3");
}

// TF's CheckpointStateTest.testCheckPointStateFailsWhenIncomplete: an empty state file is an error.
TEST(CheckpointStateTest, CheckPointStateFailsWhenIncomplete) {
  th::testing::TempDir dir;
  write_text(dir.file("checkpoint"), "");
  EXPECT_THROW(th::get_checkpoint_state(dir.path()), th::DataLossError);
}

TEST(CheckpointStateTest, TruncatedOrExtendedTextIsAParseErrorNamingTheLine) {
  auto message = [](const std::string& text) {
    return th::testing::error_message<th::DataLossError>(
        [&] { th::parse_checkpoint_state(text, "/r/checkpoint"); });
  };
  const std::string whole =
      "model_checkpoint_path: \"/r/model.ckpt-2\"\n"
      "all_model_checkpoint_paths: \"/r/model.ckpt-1\"\n"
      "all_model_checkpoint_paths: \"/r/model.ckpt-2\"\n"
      "all_model_checkpoint_timestamps: 1700000000.5\n"
      "all_model_checkpoint_timestamps: 1700000600.25\n";
  EXPECT_NO_THROW(th::parse_checkpoint_state(whole, "/r/checkpoint"));
  const std::string prefix = "Cannot parse the checkpoint state /r/checkpoint ";
  // Without a final newline the text is whole, as TensorFlow reads it (a number cut short at the
  // very end is indistinguishable: state files are written atomically for that reason).
  EXPECT_EQ(th::parse_checkpoint_state(whole.substr(0, whole.size() - 1), "/r/checkpoint")
                .all_model_checkpoint_timestamps.back(),
            1700000600.25);
  EXPECT_EQ(th::parse_checkpoint_state(whole.substr(0, whole.find("\n")), "/r/checkpoint")
                .model_checkpoint_path,
            "/r/model.ckpt-2");
  // Cut inside a quoted path, or a quote missing.
  EXPECT_EQ(message(whole.substr(0, whole.find("model.ckpt-1") + 8)),
            prefix + "(line 2): unterminated string");
  EXPECT_EQ(message("model_checkpoint_path: \"/r/model.ckpt-2\nall_model_checkpoint_paths: "
                    "\"/r/model.ckpt-2\"\n"),
            prefix + "(line 1): unterminated string");
  // Whole lines lost at the end: fewer time stamps than paths.
  EXPECT_EQ(message(whole.substr(0, whole.rfind("all_model"))),
            prefix +
                "(line 4): 2 all_model_checkpoint_paths but 1 all_model_checkpoint_timestamps "
                "(one per path): the file is truncated");
  // Trailing garbage: zeros that a crash left, or text.
  EXPECT_EQ(message(whole + std::string(4, '\0')), prefix + "(line 6): expected a field name");
  EXPECT_EQ(message(whole + "all_model_checkpoint_timestamps: 1.5 trailing\n"),
            prefix + "(line 6): expected ':'");
  EXPECT_EQ(message("model_checkpoint_path: \"a\" \"b\n"),
            prefix + "(line 1): unterminated string");
}

TEST(CheckpointStateTest, ADirectoryInPlaceOfTheStateFileIsAFileErrorNamingIt) {
  th::testing::TempDir dir;
  fs::create_directory(dir.file("checkpoint"));
  EXPECT_EQ(
      th::testing::error_message<th::FileError>([&] { th::get_checkpoint_state(dir.path()); }),
      "Cannot read the checkpoint state '" + dir.file("checkpoint") +
          "': it is a directory, not a file");
}

// A state file with absolute paths (older trainhooks, TensorFlow 1's Saver) in a directory that
// was moved or copied: the files beside it are the ones meant.
TEST(CheckpointStateTest, AbsolutePathsOfAMovedOrCopiedDirectoryResolveBesideTheStateFile) {
  th::testing::TempDir tmp;
  const std::string old_dir = tmp.file("old"), dir = tmp.file("new");
  fs::create_directories(dir);
  const std::string text = "model_checkpoint_path: \"" + old_dir +
                           "/model.ckpt-2\"\n"
                           "all_model_checkpoint_paths: \"" +
                           old_dir +
                           "/model.ckpt-1\"\n"
                           "all_model_checkpoint_paths: \"" +
                           old_dir +
                           "/model.ckpt-2\"\n"
                           "all_model_checkpoint_paths: \"/elsewhere/model.ckpt-0\"\n";
  write_text(dir + "/checkpoint", text);
  for (const char* f :
       {"model.ckpt-1", "model.ckpt-1.trainstate", "model.ckpt-2", "model.ckpt-2.trainstate"})
    write_text(dir + "/" + f, "x");
  th::testing::FakeEnv fe;

  // Moved: the old paths do not exist.
  auto state = th::get_checkpoint_state(dir, fe.env());
  ASSERT_TRUE(state);
  EXPECT_EQ(state->model_checkpoint_path, dir + "/model.ckpt-2");
  EXPECT_EQ(state->all_model_checkpoint_paths,
            (std::vector<std::string>{dir + "/model.ckpt-1", dir + "/model.ckpt-2",
                                      "/elsewhere/model.ckpt-0"}));  // nothing beside: as given
  const std::string warning = "Checkpoint state '" + dir +
                              "/checkpoint' lists checkpoints in another directory, '" + old_dir +
                              "': using the files of the same names beside it (the directory was "
                              "moved or copied): model.ckpt-2, model.ckpt-1";
  EXPECT_EQ(fe.log->messages(th::LogLevel::kWarning), std::vector<std::string>{warning});

  // Copied: the original still exists, and is still not the one meant.
  fs::copy(dir, old_dir, fs::copy_options::recursive);
  state = th::get_checkpoint_state(dir, fe.env());
  EXPECT_EQ(state->model_checkpoint_path, dir + "/model.ckpt-2");
  EXPECT_EQ(fe.log->messages(th::LogLevel::kWarning), (std::vector<std::string>{warning, warning}));

  // In the original, its own paths are used, without a warning.
  state = th::get_checkpoint_state(old_dir, fe.env());
  EXPECT_EQ(state->model_checkpoint_path, old_dir + "/model.ckpt-2");
  EXPECT_EQ(fe.log->messages(th::LogLevel::kWarning).size(), 2u);
}

TEST(CheckpointStateTest, AbsoluteDirectoryKeepsPathsAsGiven) {
  th::testing::TempDir dir;
  th::CheckpointState s;
  s.model_checkpoint_path = dir.file("model.ckpt-2");
  s.all_model_checkpoint_paths = {dir.file("model.ckpt-1")};  // the latest is appended
  th::update_checkpoint_state(dir.path(), s);
  EXPECT_EQ(read_text(dir.file("checkpoint")),
            "model_checkpoint_path: \"" + dir.file("model.ckpt-2") + "\"\n" +
                "all_model_checkpoint_paths: \"" + dir.file("model.ckpt-1") + "\"\n" +
                "all_model_checkpoint_paths: \"" + dir.file("model.ckpt-2") + "\"\n");
  auto back = th::get_checkpoint_state(dir.path());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->model_checkpoint_path, dir.file("model.ckpt-2"));
  EXPECT_EQ(back->all_model_checkpoint_paths.size(), 2u);
}

TEST(CheckpointStateTest, RelativePathsAreRelativeToTheDirectoryAndJoinedOnRead) {
  th::testing::TempDir dir;
  th::CheckpointState s;
  s.model_checkpoint_path = dir.file("model.ckpt-1");
  th::update_checkpoint_state(dir.path(), s, /*save_relative_paths=*/true);
  EXPECT_EQ(
      read_text(dir.file("checkpoint")),
      "model_checkpoint_path: \"model.ckpt-1\"\nall_model_checkpoint_paths: \"model.ckpt-1\"\n");
  EXPECT_EQ(th::get_checkpoint_state(dir.path())->model_checkpoint_path, dir.file("model.ckpt-1"));

  // A relative directory: paths (relative to the working directory) are rewritten relative to it.
  const std::string rel_dir = fs::path(dir.path()).lexically_relative(fs::current_path()).string();
  ASSERT_FALSE(fs::path(rel_dir).is_absolute());
  s.model_checkpoint_path = rel_dir + "/model.ckpt-7";
  th::update_checkpoint_state(rel_dir, s);
  EXPECT_EQ(
      read_text(dir.file("checkpoint")),
      "model_checkpoint_path: \"model.ckpt-7\"\nall_model_checkpoint_paths: \"model.ckpt-7\"\n");
  EXPECT_EQ(th::get_checkpoint_state(rel_dir)->model_checkpoint_path, rel_dir + "/model.ckpt-7");
}

TEST(CheckpointStateTest, MissingFileIsNulloptAndGarbageIsDataLoss) {
  th::testing::TempDir dir;
  EXPECT_FALSE(th::get_checkpoint_state(dir.path()));
  write_text(dir.file("checkpoint"), "\x89PNG garbage");
  EXPECT_THROW(th::get_checkpoint_state(dir.path()), th::DataLossError);
}

TEST(CheckpointStateTest, UpdateRejectsBadStates) {
  th::testing::TempDir dir;
  th::CheckpointState s;
  EXPECT_THROW(th::update_checkpoint_state(dir.path(), s), th::InvalidArgument);
  s.model_checkpoint_path = dir.file("checkpoint");
  EXPECT_THROW(th::update_checkpoint_state(dir.path(), s), th::InvalidArgument);
  s.model_checkpoint_path = dir.file("m-1");
  s.all_model_checkpoint_timestamps = {1, 2};
  EXPECT_THROW(th::update_checkpoint_state(dir.path(), s), th::InvalidArgument);
  EXPECT_FALSE(fs::exists(dir.file("checkpoint")));
}

}  // namespace checkpoint_state_test
