#!/usr/bin/env python3
# A tiny stdio MCP server for the gateway's tests (tests/e2b/mcp.test.mjs,
# tests/integration/test_mcp_gateway.py): newline-delimited JSON-RPC on
# stdin and stdout, each tools/call on a thread of its own.
#   python3 server.py [--only TOOL,...]
# Tools: echo (ECHO_PREFIX + text), add, fail (a JSON-RPC error), sleep,
# env (what the server was started with), exit (ends the process unanswered).
import json
import os
import sys
import threading
import time

out_lock = threading.Lock()


def send(msg):
    with out_lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def text(s):
    return {"content": [{"type": "text", "text": s}]}


def obj(props, required):
    return {"type": "object", "properties": props, "required": required}


TOOLS = {
    "echo": ("says the text back, after ECHO_PREFIX", obj({"text": {"type": "string"}}, ["text"])),
    "add": ("adds two numbers", obj({"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"])),
    "fail": ("answers a JSON-RPC error", obj({"message": {"type": "string"}}, ["message"])),
    "sleep": ("answers after some seconds", obj({"seconds": {"type": "number"}}, ["seconds"])),
    "env": ("what this server runs with", obj({}, [])),
    "exit": ("ends this server without an answer", obj({"status": {"type": "integer"}}, [])),
}


def call(name, args):
    if name == "echo":
        return text(os.environ.get("ECHO_PREFIX", "") + str(args.get("text", "")))
    if name == "add":
        total = args["a"] + args["b"]
        return dict(text(str(total)), structuredContent={"sum": total})
    if name == "fail":
        raise ValueError(args.get("message", "failed"))
    if name == "sleep":
        time.sleep(float(args.get("seconds", 1)))
        return text("slept")
    if name == "env":
        seen = {k: os.environ.get(k) for k in ("ECHO_PREFIX", "EXTRA", "FROM_CATALOG",
                                               "GITHUB_PERSONAL_ACCESS_TOKEN", "PORT_LIST")}
        seen["token_seen"] = "GATEWAY_ACCESS_TOKEN" in os.environ
        seen["cwd"] = os.getcwd()
        return text(json.dumps(seen, sort_keys=True))
    if name == "exit":
        sys.stdout.flush()
        os._exit(int(args.get("status", 3)))
    raise KeyError(name)


def on_call(rid, params, only):
    name = params.get("name")
    if name not in only:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no tool %s" % name}})
        return
    try:
        send({"jsonrpc": "2.0", "id": rid, "result": call(name, params.get("arguments") or {})})
    except ValueError as e:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": str(e)}})


def main():
    only = list(TOOLS)
    if len(sys.argv) == 3 and sys.argv[1] == "--only":
        only = sys.argv[2].split(",")
    for line in sys.stdin:
        msg = json.loads(line)
        rid, method = msg.get("id"), msg.get("method")
        if rid is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hutch-echo", "version": "1"},
                "instructions": "echo and friends"}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
                {"name": n, "description": TOOLS[n][0], "inputSchema": TOOLS[n][1]} for n in only]}})
        elif method == "tools/call":
            threading.Thread(target=on_call, args=(rid, msg["params"], only), daemon=True).start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}})


if __name__ == "__main__":
    main()
