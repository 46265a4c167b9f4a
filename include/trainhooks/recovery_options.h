// How a monitored session recovers from a lost session (monitored_session.h: Recovery):
// MonitoredSessionOptions::recovery and MonitoredTrainingSessionOptions::recovery.
#pragma once

namespace trainhooks {

struct RecoveryOptions {
  // Recreate the session and retry the call on AbortedError / UnavailableError.
  bool enabled = true;
  // Consecutive recoveries without a successful run before the error is raised.
  int max_attempts = 10;
  // The first retry is immediate; later ones wait this long, doubled each time, up to 60 s.
  double backoff_secs = 1;
};

}  // namespace trainhooks
