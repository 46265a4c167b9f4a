// RestartFilter: TensorBoard's purge of orphaned data, applied to the events of one run.
//
// When training restarts from a checkpoint at step s, the values an earlier attempt wrote at
// steps >= s are orphaned: the restarted run writes those steps again. TensorBoard's event
// accumulator (purge_orphaned_data, on by default) discards them as it reads a run's files in
// order, and this filter does the same:
//   - while the run's latest file_version is "brain.Event:2" or later (every writer today), a
//     SessionLog START at step s, other than the run's first START, discards every summary value
//     read before it whose step is >= s;
//   - without a file version (very old files), a summary event whose step is lower than the
//     previous summary event's discards the earlier values of its own tags with step >= its step.
// Values after the purge, session logs, graphs and version records are kept. An event left with
// no values by a purge is removed.
//
//   trainhooks::summary::RestartFilter filter;
//   for (auto& e : trainhooks::summary::read_events("runs/exp1")) filter.add(std::move(e));
//   for (const auto& e : filter.events()) ...        // what TensorBoard shows
//   for (const auto& p : filter.purges()) ...        // what it discarded, and why
//
// Thread safety: one filter per thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainhooks/summary/event_reader.h"

namespace trainhooks::summary {

struct Purge {
  bool restart = true;  // a SessionLog START; false: a summary event with an out-of-order step
  int64_t step = 0;     // values with step >= this were discarded
  int64_t previous_step = 0;        // the step of the last summary event before it
  std::vector<std::string> tags{};  // out-of-order purges: the tags purged
  int64_t values = 0;               // summary values discarded
};

// The decision half of RestartFilter, for readers that keep values their own way (the board's
// index keeps them per tag): given a run's events in read order, says which earlier values each
// one makes orphaned. RestartFilter applies its decisions to the events it keeps.
struct PurgeDecision {
  bool purge = false;    // discard the values read before with step >= `step`
  bool by_tags = false;  // only those of the event's own tags (a version-less out-of-order step)
  int64_t step = 0;
  int64_t previous_step = 0;  // the step of the last summary event before it
};

class RestartDetector {
 public:
  // Call with every event of the run, in read order, before keeping its values.
  PurgeDecision add(const Event& event);

 private:
  double file_version_ = 0;  // of the latest file; 0: none seen
  bool seen_start_ = false;
  int64_t most_recent_step_ = -1;
};

class RestartFilter {
 public:
  // Adds the run's next event (in read order), discarding what it makes orphaned.
  void add(Event event);

  // The events kept so far, in read order.
  const std::vector<Event>& events() const { return events_; }
  std::vector<Event>& events() { return events_; }
  // Purges that discarded at least one value, in order.
  const std::vector<Purge>& purges() const { return purges_; }

 private:
  void purge(const Event& by, const PurgeDecision& decision);

  RestartDetector detector_;
  std::vector<Event> events_;
  std::vector<Purge> purges_;
};

// One line for a purge, e.g. "restart at step 51 (SessionLog START): 15 earlier values with
// step >= 51 discarded".
std::string describe_purge(const Purge& purge);

// The number in a file_version such as "brain.Event:2"; -1 when it has none.
double parse_file_version(const std::string& file_version);

}  // namespace trainhooks::summary
