// thrive-cpu-executor: the process a confined CPU candidate kernel runs in. The sandbox worker
// starts it (fork, then execve with the candidate's environment only), so the candidate starts
// with none of THRIVE's memory; see include/thrive/backend/cpu_executor.hpp for the protocol.
// Run by hand, it says so and exits with status 2.
#include "thrive/backend/cpu_executor.hpp"

int main(int argc, char** argv) { return thrive::backend::CpuExecutor::serve(argc, argv); }
