// What distributed start-up says when it fails, one message per cause, so that a user sees which
// one it is (a peer that never came, a wrong interface, an unreachable address) instead of one
// text for all. Pure functions of what start-up found: the tests check their exact words. Private
// to distributed/.
#pragma once

#include <string>
#include <vector>

#include "distributed/network.h"

namespace trainhooks::distributed::internal {

// Who is starting and where the ranks meet.
struct StartupPlace {
  int rank = 0;
  int world_size = 1;
  // "the store at 127.0.0.1:29500" or "the file store /tmp/store".
  std::string store;
  // The TCP store's MASTER_ADDR and MASTER_PORT, when it is one; "" for a file store.
  std::string master_addr;
  int master_port = 0;
  // torchrun's agent serves the TCP store, not rank 0.
  bool agent_store = false;
  double timeout_secs = 300;
};

// "rank 1", "ranks 1 and 3", "ranks 1, 3-5 and 7" (ranks sorted, each once).
std::string describe_ranks(const std::vector<int>& ranks);

// The store was reached, but `missing` did not register there before the deadline.
std::string missing_ranks_message(const StartupPlace& place, const std::vector<int>& missing);

// A TCP store client could not connect to the store before the deadline; `why` is the last
// attempt's failure ("Connection refused", "no answer").
std::string unreachable_store_message(const StartupPlace& place, const std::string& why);

// GLOO_SOCKET_IFNAME names an interface that this machine does not have, or one without an IP
// address.
std::string missing_interface_message(const std::string& name,
                                      const std::vector<NetworkInterface>& interfaces);

// Every rank reached the store, but Gloo's connections between them were not made: `why` is
// Gloo's error ("" when it did not answer before the deadline); `gloo_addresses[r]` is the address
// rank r's Gloo listens on, as it registered it.
std::string gloo_connect_message(const StartupPlace& place,
                                 const std::vector<std::string>& gloo_addresses,
                                 const std::string& why);

// The warning for an address that only this machine reaches while the master is elsewhere:
// Gloo's address is loopback (`chosen_by` says why: "GLOO_SOCKET_IFNAME=lo", "this machine's
// hostname 'vm' resolves to it"), MASTER_ADDR is not.
std::string loopback_warning(const StartupPlace& place, const std::string& gloo_address,
                             const std::string& chosen_by,
                             const std::vector<NetworkInterface>& interfaces);

}  // namespace trainhooks::distributed::internal
