// LayeringTest.UpwardIncludeFailsToCompile (tests/CMakeLists.txt) compiles this as code of
// lockstep_comm's level (it links lockstep_comm and nothing above) and expects it NOT to
// compile: the launcher's header is above comm, so comm's code cannot see it (ARCHITECTURE.md).
#include "harness/launch/launcher.h"
