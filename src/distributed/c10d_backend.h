// The collective backend over LibTorch's c10d (collective_backend.h): any c10d::ProcessGroup, and
// the rendezvous that builds Gloo's. Private: only c10d_backend.cpp includes c10d's headers, which
// cost much compile time.
#pragma once

#include <memory>
#include <string>

#include "trainhooks/distributed/collective_backend.h"

namespace trainhooks::distributed::internal {

// Where and how the ranks meet (InitOptions, resolved from the environment by init()).
struct C10dRendezvous {
  int rank = 0;
  int world_size = 1;
  // A file store when set; else a TCP store at master_addr:master_port.
  std::string file_store;
  std::string master_addr;
  int master_port = 0;
  // torchrun's agent serves the TCP store (TORCHELASTIC_USE_AGENT_STORE); its keys are per restart.
  bool agent_store = false;
  int restart_count = 0;
  double timeout_secs = 300;
};

// Joins the Gloo group that `rendezvous` describes. DeadlineExceededError when the others do not
// arrive within its timeout, UnavailableError when the store cannot be reached, both naming it.
std::unique_ptr<CollectiveBackend> make_gloo_backend(const C10dRendezvous& rendezvous);

}  // namespace trainhooks::distributed::internal
