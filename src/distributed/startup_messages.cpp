#include "distributed/startup_messages.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace trainhooks::distributed::internal {

namespace {

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? " and " : ", ";
    out += parts[i];
  }
  return out;
}

std::string who(const StartupPlace& place) {
  return fmt::format("rank {} of {}", place.rank, place.world_size);
}

// The names of the interfaces that have an address, loopback ones only when `loopback`.
std::vector<std::string> usable_interfaces(const std::vector<NetworkInterface>& interfaces,
                                           bool loopback) {
  std::vector<std::string> names;
  for (const auto& i : interfaces)
    if (!i.addresses.empty() && (loopback || !i.loopback)) names.push_back(i.name);
  return names;
}

}  // namespace

std::string describe_ranks(const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<std::string> runs;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    runs.push_back(j == i ? std::to_string(sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]));
    i = j + 1;
  }
  return (sorted.size() == 1 ? "rank " : "ranks ") + joined(runs);
}

std::string missing_ranks_message(const StartupPlace& place, const std::vector<int>& missing) {
  return fmt::format(
      "trainhooks distributed: {} gave up after {} s at {}: {} never arrived (start every rank "
      "within {} s of the others, with the same WORLD_SIZE{})",
      who(place), place.timeout_secs, place.store, describe_ranks(missing), place.timeout_secs,
      place.master_addr.empty() ? " and file store" : ", MASTER_ADDR and MASTER_PORT");
}

std::string unreachable_store_message(const StartupPlace& place, const std::string& why) {
  if (place.agent_store) {
    return fmt::format(
        "trainhooks distributed: {} gave up after {} s: torchrun's store at {}:{} did not accept "
        "a connection ({})",
        who(place), place.timeout_secs, place.master_addr, place.master_port, why);
  }
  return fmt::format(
      "trainhooks distributed: {} gave up after {} s: the store at {}:{}, which rank 0 serves, did "
      "not accept a connection ({}): rank 0 never arrived, or MASTER_ADDR and MASTER_PORT are not "
      "its address",
      who(place), place.timeout_secs, place.master_addr, place.master_port, why);
}

std::string missing_interface_message(const std::string& name,
                                      const std::vector<NetworkInterface>& interfaces) {
  const auto found = std::find_if(interfaces.begin(), interfaces.end(),
                                  [&](const NetworkInterface& i) { return i.name == name; });
  if (found != interfaces.end()) {
    return fmt::format(
        "trainhooks distributed: GLOO_SOCKET_IFNAME={} names an interface without an IP address "
        "(those with one: {})",
        name, fmt::join(usable_interfaces(interfaces, true), ", "));
  }
  std::vector<std::string> names;
  for (const auto& i : interfaces) names.push_back(i.name);
  return fmt::format(
      "trainhooks distributed: GLOO_SOCKET_IFNAME={} is not a network interface of this machine "
      "(it has: {})",
      name, fmt::join(names, ", "));
}

std::string gloo_connect_message(const StartupPlace& place,
                                 const std::vector<std::string>& gloo_addresses,
                                 const std::string& why) {
  std::vector<std::string> addresses;
  for (size_t r = 0; r < gloo_addresses.size(); ++r)
    addresses.push_back(fmt::format("rank {} {}", r, gloo_addresses[r]));
  return fmt::format(
      "trainhooks distributed: {} could not connect to the other ranks through Gloo within {} s, "
      "though every rank reached {}: {}; Gloo's addresses: {} (every rank must reach the others' "
      "addresses: GLOO_SOCKET_IFNAME chooses the interface)",
      who(place), place.timeout_secs, place.store, why.empty() ? "no answer" : why,
      fmt::join(addresses, ", "));
}

std::string loopback_warning(const StartupPlace& place, const std::string& gloo_address,
                             const std::string& chosen_by,
                             const std::vector<NetworkInterface>& interfaces) {
  const std::vector<std::string> others = usable_interfaces(interfaces, false);
  return fmt::format(
      "trainhooks distributed: {}: Gloo's address is {} ({}), a loopback address, but MASTER_ADDR "
      "{} is not: ranks on other machines cannot connect to this one; set GLOO_SOCKET_IFNAME to "
      "an interface they reach{}",
      who(place), gloo_address, chosen_by, place.master_addr,
      others.empty() ? "" : fmt::format(" (this machine's: {})", fmt::join(others, ", ")));
}

}  // namespace trainhooks::distributed::internal
