// Hyperparameters for TensorBoard's HParams dashboard: the values a run was trained with and the
// metrics to compare runs by.
//
// A run declares its hyperparameters (name -> number, string or bool) and the scalar tags that
// measure it. TensorBoard's HParams plugin (plugin name "hparams") reads three summaries, each a
// value whose plugin metadata content is a serialized HParamsPluginData (version 0) and whose
// tensor is an empty float vector, as TensorBoard's own writer makes them:
//   "_hparams_/experiment"          the hyperparameters' names and types, and the metrics
//   "_hparams_/session_start_info"  this run's values, its group, where its checkpoints are
//   "_hparams_/session_end_info"    how the run ended (HParamsStatus)
// Summary::add_hparams_experiment / add_hparams_session_start / add_hparams_session_end
// (summary.h) make them; EventReader decodes them into HParamsValue (ValueKind::kHParams).
// TensorBoard keeps the first of each tag it reads in a run: a resumed run's later start info
// does not replace the first one, and a written end status is final.
//
//   trainhooks::summary::HParams hp{
//       .values = {{"optimizer", "adam"}, {"lr", 2e-3}, {"batch", 64}, {"augment", true}},
//       .metrics = {{.tag = "accuracy", .group = "eval"}, {.tag = "loss"}}};
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace trainhooks::summary {

// One hyperparameter's value: a number (any arithmetic type, kept as a double, as TensorBoard
// keeps it), a string or a bool. Implicit, so that a map of values reads as a literal.
class HParamValue {
 public:
  using Variant = std::variant<double, std::string, bool>;

  HParamValue() : value_(0.0) {}
  HParamValue(bool b) : value_(b) {}  // NOLINT: implicit by design
  template <typename T>
  requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) HParamValue(T number)
      : value_(static_cast<double>(number)) {}                 // NOLINT
  HParamValue(std::string s) : value_(std::move(s)) {}         // NOLINT
  HParamValue(const char* s) : value_(std::string(s)) {}       // NOLINT
  HParamValue(std::string_view s) : value_(std::string(s)) {}  // NOLINT

  const Variant& value() const { return value_; }
  bool is_number() const { return std::holds_alternative<double>(value_); }
  bool is_string() const { return std::holds_alternative<std::string>(value_); }
  bool is_bool() const { return std::holds_alternative<bool>(value_); }
  double number() const { return std::get<double>(value_); }
  const std::string& string() const { return std::get<std::string>(value_); }
  bool boolean() const { return std::get<bool>(value_); }
  // As `trainhooks events` prints it: 0.002, "adam", true.
  std::string to_string() const;
  bool operator==(const HParamValue&) const = default;

 private:
  Variant value_;
};

// Which data a metric is computed on (TensorBoard's DatasetType).
enum class MetricDataset { kUnknown = 0, kTraining = 1, kValidation = 2 };

// A scalar tag that measures a run: `tag` in the run `<the run's directory>/<group>` (group ""
// for the run's own directory, "eval" for an EvaluationHook writing to <dir>/eval).
struct HParamsMetric {
  std::string tag{};
  std::string group{};
  std::string display_name{};
  std::string description{};
  MetricDataset dataset = MetricDataset::kUnknown;
  bool operator==(const HParamsMetric&) const = default;
};

struct HParams {
  std::map<std::string, HParamValue> values{};
  // The metrics TensorBoard's table and plots show for each run.
  std::vector<HParamsMetric> metrics{};
  // Runs of one group are repetitions of the same values; empty: the run is its own group.
  std::string group_name{};
  // Shown with the experiment; may be Markdown.
  std::string description{};
  // Where the run's model is (SessionStartInfo.model_uri); MonitoredTrainingSession sets its
  // checkpoint_dir when this is empty.
  std::string model_uri{};

  bool empty() const { return values.empty() && metrics.empty(); }
};

// How a run ended (TensorBoard's Status).
enum class HParamsStatus { kUnknown = 0, kSuccess = 1, kFailure = 2, kRunning = 3 };
// "unknown", "success", "failure", "running".
const char* hparams_status_name(HParamsStatus status);

// One of the three summaries, as a reader decodes it.
struct HParamsValue {
  enum class Kind { kExperiment, kSessionStart, kSessionEnd };
  Kind kind = Kind::kExperiment;
  // kExperiment: the hyperparameters' names with a value of their type (0, "", false), the
  // metrics, the description, the creation time.
  // kSessionStart: the values, group_name, model_uri, the start time.
  // kSessionEnd: the status, the end time.
  std::map<std::string, HParamValue> values{};
  std::vector<HParamsMetric> metrics{};
  std::string group_name{};
  std::string description{};
  std::string model_uri{};
  HParamsStatus status = HParamsStatus::kUnknown;
  double time_secs = 0;
};

// "experiment", "session start", "session end".
const char* hparams_kind_name(HParamsValue::Kind kind);

// The three tags.
inline constexpr std::string_view kHParamsExperimentTag = "_hparams_/experiment";
inline constexpr std::string_view kHParamsSessionStartTag = "_hparams_/session_start_info";
inline constexpr std::string_view kHParamsSessionEndTag = "_hparams_/session_end_info";

// InvalidArgument naming the problem: an empty hyperparameter name, a non-finite number, a
// metric without a tag, the same metric twice.
void validate_hparams(const HParams& hparams);

}  // namespace trainhooks::summary
