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
  // Bounds the whole start-up.
  double timeout_secs = 300;
};

// Joins the Gloo group that `rendezvous` describes, or fails within its timeout (and a margin for
// a native call that does not honour it) with one of startup_messages.h's messages: the ranks that
// never arrived, a store that did not accept a connection (DeadlineExceededError), a missing
// GLOO_SOCKET_IFNAME interface (InvalidArgument, at once), Gloo's connections between the ranks
// that arrived (UnavailableError, or DeadlineExceededError for a wait). Warns when Gloo's address
// is loopback and the master's is not.
std::unique_ptr<CollectiveBackend> make_gloo_backend(const C10dRendezvous& rendezvous);

}  // namespace trainhooks::distributed::internal
