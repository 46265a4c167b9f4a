// TensorBoard's HParams summaries: the bytes, written out by hand from TensorBoard's field
// numbers (plugin_data.proto HParamsPluginData{version = 1, experiment = 2, session_start_info =
// 3, session_end_info = 4}, SessionEndInfo{status = 1, end_time_secs = 2}, ...), and what the
// reader and `trainhooks events` make of them.
#include "trainhooks/summary/hparams.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "summary_test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/summary/inspect.h"
#include "trainhooks/summary/summary.h"

namespace trainhooks::summary {
namespace hparams_test {

using testing::bytes;
using ::testing::HasSubstr;

// 1700000000.5 as a little-endian double.
const std::string kTime = bytes({0x00, 0x00, 0x20, 0x40, 0xfc, 0x54, 0xd9, 0x41});
// TensorBoard's NULL_TENSOR as Summary.Value.tensor (8): DT_FLOAT, shape [0].
const std::string kNullTensor = bytes({0x42, 0x06, 0x08, 0x01, 0x12, 0x02, 0x12, 0x00});

// A Summary.Value of the hparams plugin: tag, the null tensor, metadata with `content`.
std::string hparams_value(const std::string& tag, const std::string& content) {
  const std::string plugin_data =
      bytes({0x0a, 0x07}) + "hparams" + bytes({0x12, static_cast<int>(content.size())}) + content;
  const std::string metadata = bytes({0x0a, static_cast<int>(plugin_data.size())}) + plugin_data;
  const std::string value = bytes({0x0a, static_cast<int>(tag.size())}) + tag + kNullTensor +
                            bytes({0x4a, static_cast<int>(metadata.size())}) + metadata;
  return bytes({0x0a, static_cast<int>(value.size())}) + value;
}

TEST(HParamsSummaryTest, SessionEndIsStatusAndTimeInThePluginMetadata) {
  Summary s;
  s.add_hparams_session_end(HParamsStatus::kSuccess, 1700000000.5);
  // HParamsPluginData{session_end_info (4) {status (1): 1, end_time_secs (2): t}}; version 0.
  const std::string content = bytes({0x22, 0x0b, 0x08, 0x01, 0x11}) + kTime;
  EXPECT_EQ(s.serialize(), hparams_value("_hparams_/session_end_info", content));
}

TEST(HParamsSummaryTest, SessionStartHoldsTheValuesAsProtobufValues) {
  Summary s;
  s.add_hparams_session_start(
      {.values = {{"lr", 0.5}, {"opt", "sgd"}, {"bn", true}}, .group_name = "g", .model_uri = "m"},
      1700000000.5);
  // hparams (1): map entries {key (1), value (2): google.protobuf.Value{number_value = 2,
  // string_value = 3, bool_value = 4}}, in key order (deterministic); model_uri (2),
  // group_name (4), start_time_secs (5).
  const std::string bn = bytes({0x0a, 0x02}) + "bn" + bytes({0x12, 0x02, 0x20, 0x01});
  const std::string lr =
      bytes({0x0a, 0x02}) + "lr" + bytes({0x12, 0x09, 0x11, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f});
  const std::string opt = bytes({0x0a, 0x03}) + "opt" + bytes({0x12, 0x05, 0x1a, 0x03}) + "sgd";
  const std::string info = bytes({0x0a, static_cast<int>(bn.size())}) + bn +
                           bytes({0x0a, static_cast<int>(lr.size())}) + lr +
                           bytes({0x0a, static_cast<int>(opt.size())}) + opt + bytes({0x12, 0x01}) +
                           "m" + bytes({0x22, 0x01}) + "g" + bytes({0x29}) + kTime;
  const std::string content = bytes({0x1a, static_cast<int>(info.size())}) + info;
  EXPECT_EQ(s.serialize(), hparams_value("_hparams_/session_start_info", content));
  testing::TempDir dir;
  {
    EventWriter writer(dir.path());
    writer.add_summary(s, 0);
  }
  const auto events = read_events(dir.path());
  ASSERT_EQ(events.size(), 2u);
  ASSERT_EQ(events[1].values.size(), 1u);
  const EventValue& v = events[1].values[0];
  EXPECT_EQ(v.kind, ValueKind::kHParams);
  EXPECT_EQ(v.plugin_name, "hparams");
  ASSERT_TRUE(v.hparams);
  EXPECT_EQ(v.hparams->kind, HParamsValue::Kind::kSessionStart);
  EXPECT_EQ(v.hparams->values,
            (std::map<std::string, HParamValue>{{"bn", true}, {"lr", 0.5}, {"opt", "sgd"}}));
  EXPECT_EQ(v.hparams->group_name, "g");
  EXPECT_EQ(v.hparams->model_uri, "m");
  EXPECT_EQ(v.hparams->time_secs, 1700000000.5);
}

TEST(HParamsSummaryTest, ExperimentListsNamesTypesAndMetrics) {
  Summary s;
  s.add_hparams_experiment({.values = {{"lr", 0.5}},
                            .metrics = {{.tag = "acc",
                                         .group = "eval",
                                         .display_name = "A",
                                         .dataset = MetricDataset::kValidation}},
                            .description = "d"},
                           1700000000.5);
  // Experiment{description (1), time_created_secs (3), hparam_infos (4) {name (1), type (4):
  // DATA_TYPE_FLOAT64 (3)}, metric_infos (5) {name (1) {group (1), tag (2)}, display_name (3),
  // dataset_type (5): DATASET_VALIDATION (2)}}.
  const std::string hparam = bytes({0x0a, 0x02}) + "lr" + bytes({0x20, 0x03});
  const std::string name = bytes({0x0a, 0x04}) + "eval" + bytes({0x12, 0x03}) + "acc";
  const std::string metric = bytes({0x0a, static_cast<int>(name.size())}) + name +
                             bytes({0x1a, 0x01}) + "A" + bytes({0x28, 0x02});
  const std::string experiment = bytes({0x0a, 0x01}) + "d" + bytes({0x19}) + kTime +
                                 bytes({0x22, static_cast<int>(hparam.size())}) + hparam +
                                 bytes({0x2a, static_cast<int>(metric.size())}) + metric;
  const std::string content = bytes({0x12, static_cast<int>(experiment.size())}) + experiment;
  EXPECT_EQ(s.serialize(), hparams_value("_hparams_/experiment", content));
}

TEST(HParamsSummaryTest, EveryValueCarriesItsMetadataAndEventsShowsTheRun) {
  testing::TempDir dir;
  const HParams hp{.values = {{"opt", "adam"}, {"lr", 0.002}, {"batch", 64}},
                   .metrics = {{.tag = "accuracy", .group = "eval"}, {.tag = "loss"}}};
  {
    EventWriter writer(dir.path());
    Summary start;
    start.add_hparams_experiment(hp, 1).add_hparams_session_start(hp, 1);
    writer.add_summary(start, 0);
    // A second start in the same file still has its data: hparams metadata is on every value.
    writer.add_summary(Summary().add_hparams_session_start(hp, 2), 0);
    writer.add_summary(Summary().add_hparams_session_end(HParamsStatus::kFailure, 3), 7);
  }
  std::vector<HParamsValue::Kind> kinds;
  for (const Event& e : read_events(dir.path())) {
    for (const EventValue& v : e.values) {
      ASSERT_TRUE(v.hparams) << v.tag;
      kinds.push_back(v.hparams->kind);
    }
  }
  EXPECT_EQ(kinds, (std::vector<HParamsValue::Kind>{
                       HParamsValue::Kind::kExperiment, HParamsValue::Kind::kSessionStart,
                       HParamsValue::Kind::kSessionStart, HParamsValue::Kind::kSessionEnd}));
  std::ostringstream out;
  print_runs(out, inspect_logdir(dir.path()));
  EXPECT_THAT(out.str(), HasSubstr("  _hparams_/experiment          hparams      1  0      "
                                   "3 hparams, 2 metrics\n"));
  EXPECT_THAT(out.str(),
              HasSubstr("  _hparams_/session_end_info    hparams      1  7      failure\n"));
  EXPECT_THAT(out.str(), HasSubstr("  hparams: batch=64, lr=0.002, opt=\"adam\"\n"
                                   "  hparams metrics: eval/accuracy, loss\n"
                                   "  hparams status: failure\n"));
}

TEST(HParamsSummaryTest, ValuesConvertFromNumbersStringsAndBools) {
  EXPECT_TRUE(HParamValue(3).is_number());
  EXPECT_EQ(HParamValue(int64_t{1} << 40).number(), 1099511627776.0);
  EXPECT_TRUE(HParamValue(2.5f).is_number());
  EXPECT_TRUE(HParamValue("adam").is_string());
  EXPECT_TRUE(HParamValue(std::string("x")).is_string());
  EXPECT_TRUE(HParamValue(false).is_bool());
  EXPECT_EQ(HParamValue(0.002).to_string(), "0.002");
  EXPECT_EQ(HParamValue("a").to_string(), "\"a\"");
  EXPECT_EQ(HParamValue(true).to_string(), "true");
  EXPECT_THROW(Summary().add_hparams_session_start({.values = {{"x", 1.0 / 0.0}}}, 0),
               InvalidArgument);
}

}  // namespace hparams_test
}  // namespace trainhooks::summary
