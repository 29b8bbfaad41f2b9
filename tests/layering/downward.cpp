// LayeringTest.DownwardIncludeCompiles (tests/CMakeLists.txt): the control of upward.cpp. Code
// that links lockstep_comm sees comm's headers and, through comm's PUBLIC links, those of the
// areas below it that comm's headers include.
#include "harness/comm/types.h"
#include "harness/core/error.h"
#include "harness/trace/record.h"
