// A watchdog for blocking native calls that may not honour their own timeout (Gloo's pair connect
// retries for several times its timeout; c10d's store calls bound each wait, not their sum).
// Private to distributed/.
//
//   auto backend = call_with_deadline<std::unique_ptr<B>>(
//       [store, device] { return connect(store, device); }, 5.0,
//       [] { throw DeadlineExceededError("..."); });
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <utility>

namespace trainhooks::distributed::internal {

// Runs `fn` on a thread of its own and returns what it returns (or rethrows what it throws) when it
// ends within `timeout_secs`. Otherwise calls `on_timeout`, which must throw, and leaves `fn`
// running on the detached thread, so that the caller can report the error and the process can
// exit although the native call never returns. `fn` must therefore own everything it uses (capture
// by value, shared pointers); its late result is destroyed on its own thread.
template <typename T>
T call_with_deadline(std::function<T()> fn, double timeout_secs,
                     const std::function<void()>& on_timeout) {
  auto promise = std::make_shared<std::promise<T>>();
  std::future<T> result = promise->get_future();
  std::thread worker([fn = std::move(fn), promise] {
    try {
      promise->set_value(fn());
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
  if (result.wait_for(std::chrono::duration<double>(timeout_secs)) != std::future_status::ready) {
    worker.detach();
    on_timeout();
    std::terminate();  // on_timeout did not throw: a bug of the caller
  }
  worker.join();
  return result.get();
}

}  // namespace trainhooks::distributed::internal
