// The command line of tests/tools/distributed_trainer.cpp for a test that starts ranks itself:
// torchrun's and Gloo's variables of the test's own environment cleared, then `env`
// ("RANK=0", ...), then the trainer's `args`.
#pragma once

#include <string>
#include <vector>

namespace trainhooks::testing {

inline std::vector<std::string> trainer_command(const std::vector<std::string>& env,
                                                const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/usr/bin/env"};
  for (const char* name :
       {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "GLOO_SOCKET_IFNAME",
        "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE"}) {
    argv.insert(argv.end(), {"-u", name});
  }
  argv.insert(argv.end(), env.begin(), env.end());
  argv.push_back(TRAINHOOKS_DISTRIBUTED_TRAINER);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace trainhooks::testing
