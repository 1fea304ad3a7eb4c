"""`thrive mcp` driven by the official MCP Python SDK client (package `mcp` from PyPI).

Run by CTest through tests/mcp/run_sdk_test.sh, which creates the virtual environment.
Usage: test_mcp_sdk.py THRIVE_BINARY
Each check prints one line; any failure raises, and the exit status is non-zero.
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

THRIVE = sys.argv[1]
HOME = tempfile.mkdtemp(prefix="thrive-mcp-")
# Small model dimensions keep every verification shape tiny (as the C++ CLI tests do).
ENV = {
    "THRIVE_HOME": HOME,
    "THRIVE_DEVICE": "cpu",
    "THRIVE_HIDDEN": "256",
    "THRIVE_INTERMEDIATE": "384",
    "THRIVE_NUM_HEADS": "4",
    "THRIVE_NUM_KV_HEADS": "2",
    "THRIVE_HEAD_DIM": "64",
    "THRIVE_VOCAB": "3000",
    "THRIVE_MAX_SHAPE_BYTES": "1048576",
    "THRIVE_CANDIDATE_TIMEOUT_S": "60",
}

HEADER = """// @thrive op: swiglu_act
// @thrive backend: cpu
// @thrive entry: k
#include <math.h>
#include "thrive_cpu.h"
"""

# out[t, i] = bf16(silu(gate) * up), gate = in[t, i], up = in[t, I + i]
GOOD = HEADER + """
THRIVE_EXPORT int k(const ThriveArgs* a) {
  const uint16_t* in = (const uint16_t*)a->tensors[0];
  uint16_t* out = (uint16_t*)a->tensors[1];
  const int64_t T = a->dims[0], I = a->dims[1];
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i) {
      const float g = thrive_bf16_to_f32(in[t * 2 * I + i]);
      const float u = thrive_bf16_to_f32(in[t * 2 * I + I + i]);
      out[t * I + i] = thrive_f32_to_bf16(g / (1.0f + expf(-g)) * u);
    }
  return 0;
}
"""
# silu(gate) without the up factor: wrong everywhere.
WRONG = GOOD.replace("* u);", ");")
# Dereferences a null pointer: SIGSEGV inside the candidate's worker.
CRASH = HEADER + """
THRIVE_EXPORT int k(const ThriveArgs* a) {
  volatile uint16_t* p = (uint16_t*)0;
  *p = 1;
  return a->num_tensors;
}
"""


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what, flush=True)


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def sdk_session():
    params = StdioServerParameters(command=THRIVE, args=["mcp"], env=ENV)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "thrive", "initialize names the server")
            check(init.capabilities.tools is not None, "server declares the tools capability")

            tools = (await session.list_tools()).tools
            names = {t.name for t in tools}
            expected = {"list_ops", "get_op_spec", "compile", "verify", "benchmark", "profile",
                        "read_memory", "record_strategy", "leaderboard"}
            check(names == expected, f"tools/list has exactly {sorted(expected)}")
            check(all(t.input_schema.get("type") == "object" for t in tools),
                  "every tool has an object input schema")

            ops = await session.call_tool("list_ops", {})
            check(not ops.is_error and len(ops.structured_content["ops"]) == 5, "list_ops: five ops")

            spec = await session.call_tool("get_op_spec", {"op": "swiglu_act"})
            check(not spec.is_error, "get_op_spec swiglu_act")
            check([t["name"] for t in spec.structured_content["tensors"]] == ["in", "out"],
                  "spec lists the tensors in ABI order")

            bad_op = await session.call_tool("get_op_spec", {"op": "nope"})
            check(bad_op.is_error and "nope" in text_of(bad_op), "unknown op is a tool error naming it")

            good = await session.call_tool("benchmark", {"op": "swiglu_act", "source": GOOD})
            check(not good.is_error, "correct kernel: benchmark passes: " + text_of(good)[:200])
            g = good.structured_content
            check(g["status"] == "passed" and g["bench"]["median_us"] > 0, "it was timed")
            check(g["time_us"] > 0 and g["speedup_vs_eager"] > 0, "speedup over eager reported")
            kernel_id = g["kernel_id"]

            board = await session.call_tool("leaderboard", {"op": "swiglu_act"})
            ids = [e["kernel_id"] for e in board.structured_content["entries"]]
            check(kernel_id in ids, "the benchmarked kernel is on the leaderboard")

            wrong = await session.call_tool("verify", {"op": "swiglu_act", "source": WRONG})
            w = wrong.structured_content
            check(wrong.is_error and w["status"] == "incorrect", "wrong kernel: rejected as incorrect")
            check(w["verify"]["max_rel_err"] > 0.01, "with its error figures")

            crash = await session.call_tool("benchmark", {"op": "swiglu_act", "source": CRASH})
            check(crash.is_error and crash.structured_content["status"] == "crashed",
                  "crashing kernel: contained, status crashed")

            broken = await session.call_tool("compile", {"op": "swiglu_act",
                                                         "source": GOOD.replace("return 0;", "return 0")})
            check(broken.is_error and broken.structured_content["status"] == "compile_failed"
                  and "error" in broken.structured_content["compile_log"],
                  "compile error: compile_failed with the compiler log")

            missing = await session.call_tool("verify", {"op": "swiglu_act"})
            check(missing.is_error and "source" in text_of(missing), "missing argument is a tool error")

            prof = await session.call_tool("profile", {"op": "swiglu_act"})
            check(not prof.is_error and prof.structured_content["profile"]["bottleneck"],
                  "profile of the best kernel in memory names a bottleneck")

            card = {"id": "mcp_test_card", "title": "Eight lanes", "traits": ["elementwise"],
                    "set": {"VEC": "8"}}
            rec = await session.call_tool("record_strategy", card)
            check(not rec.is_error, "record_strategy stores a learned card")
            again = await session.call_tool("record_strategy", card)
            check(again.is_error and "already exists" in text_of(again), "a duplicate card id is refused")

            mem = await session.call_tool("read_memory", {"op": "swiglu_act"})
            check(not mem.is_error and any(c["id"] == "mcp_test_card" for c in mem.structured_content["cards"]),
                  "read_memory shows the learned card")
            check(mem.structured_content["best"]["kernel_id"] == kernel_id, "and the best kernel")

            await session.send_ping()
            check(True, "server still up after a crash and errors (ping)")


def raw_protocol():
    """Malformed JSON-RPC straight on the pipe: errors come back and the server stays up."""
    lines = [
        "this is not json",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),  # before initialize
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "initialize",
                    "params": {"protocolVersion": "1999-01-01", "capabilities": {},
                               "clientInfo": {"name": "raw", "version": "0"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "1.0", "id": 3, "method": "ping"}),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "no/such/method"}),
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope"}}),
        json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": "x"}),
        json.dumps([]),
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
    ]
    proc = subprocess.run([THRIVE, "mcp"], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, env={**os.environ, **ENV}, timeout=120)
    replies = [json.loads(l) for l in proc.stdout.splitlines()]
    by_id = {r.get("id"): r for r in replies if r.get("id") is not None}
    check(proc.returncode == 0, "raw: server exits 0 at end of input")
    check(replies[0]["error"]["code"] == -32700 and replies[0]["id"] is None, "raw: parse error -32700")
    check(by_id[1]["error"]["code"] == -32600, "raw: tools/list before initialize is refused")
    check(by_id[2]["result"]["protocolVersion"] == "2025-11-25",
          "raw: an unknown protocol version gets the server's newest")
    check(by_id[3]["error"]["code"] == -32600, "raw: jsonrpc 1.0 is an invalid request")
    check(by_id[4]["error"]["code"] == -32601, "raw: unknown method -32601")
    check(by_id[5]["error"]["code"] == -32602, "raw: unknown tool -32602")
    check(by_id[6]["error"]["code"] == -32602, "raw: params not an object -32602")
    check(any(r.get("error", {}).get("code") == -32600 and r.get("id") is None for r in replies[1:]),
          "raw: empty batch -32600")
    check(by_id[7]["result"] == {}, "raw: still answering ping after all of that")
    check(all(l.startswith("{") for l in proc.stdout.splitlines()), "raw: stdout holds only JSON-RPC")
    check("mcp: serving" in proc.stderr, "raw: logs go to stderr")


if __name__ == "__main__":
    raw_protocol()
    asyncio.run(sdk_session())
    print("all MCP checks passed")
