// The event-file reader: TFRecord framing (record_io) and Event/Summary decoding (EventReader).
//
// Input: a mode byte, then the file. Mode bit 0 set: the rest is a list of (u16 length, payload)
// chunks, each framed as a record with correct length and data CRCs, so that mutations reach the
// protobuf decoding instead of failing a checksum; clear: the rest is the file as is, so that the
// framing's own checks (bad CRCs, lengths, torn tails, resynchronisation) are exercised. Bit 1:
// ReadOptions::skip_corrupt.
//
// Any trainhooks error is an accepted outcome; a crash, a sanitizer report, another exception or
// a leak is a finding.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "fuzz_util.h"
#include "summary/record_io.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/event_reader.h"

namespace {

class DiscardLog final : public trainhooks::LogSink {
 public:
  void log(trainhooks::LogLevel, std::string_view) override {}
};

}  // namespace

// protobuf logs every string field with invalid UTF-8 at ERROR: millions of lines otherwise.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace th = trainhooks;
  th::fuzz::Cursor in(data, size);
  const uint8_t mode = in.byte();
  std::string file;
  if (mode & 1) {
    while (!in.empty()) th::summary::append_record(file, in.take(in.u16()));
  } else {
    file = std::string(in.rest());
  }
  const std::string path = th::fuzz::write_scratch("events.out.tfevents.fuzz", file);

  th::summary::ReadOptions options;
  options.skip_corrupt = (mode & 2) != 0;
  options.env.log = std::make_shared<DiscardLog>();
  try {
    th::summary::EventReader reader(path, options);
    size_t values = 0;
    while (auto event = reader.next()) values += event->values.size();
    // Everything was read: a second call at the end stays at the end.
    if (reader.next()) __builtin_trap();
  } catch (const th::Error&) {
  }
  return 0;
}
