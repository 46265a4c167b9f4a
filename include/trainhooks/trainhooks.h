// trainhooks: TensorFlow's MonitoredTrainingSession and SessionRunHooks for LibTorch.
// The umbrella header: everything a training program uses.
#pragma once

#include "trainhooks/checkpoint/variables.h"
#include "trainhooks/coordinator.h"
#include "trainhooks/env.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/hook.h"
#include "trainhooks/hooks/feed_fn_hook.h"
#include "trainhooks/hooks/final_ops_hook.h"
#include "trainhooks/hooks/global_step_waiter_hook.h"
#include "trainhooks/hooks/logging_tensor_hook.h"
#include "trainhooks/hooks/nan_tensor_hook.h"
#include "trainhooks/hooks/step_counter_hook.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/input.h"
#include "trainhooks/monitored_session.h"
#include "trainhooks/node.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"
#include "trainhooks/timer.h"
