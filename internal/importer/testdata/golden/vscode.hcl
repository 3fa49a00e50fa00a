# mcp-proxy configuration written by `mcp-proxy import` from:
#   testdata/vscode/.vscode/mcp.json
#
# Environment variables it reads (set them where mcp-proxy runs; the secrets of the
# imported files were not copied: give their values there):
#   FETCH_SECRET  secret, not copied: upstream "fetch" env FETCH_SECRET
#   GITHUB_TOKEN  VS Code input "github-token" (GitHub personal access token): upstream "github" header Authorization
#   HOME          upstream "fetch" env HOME_DIR
#   REGION        VS Code input "region" (Region), optional: upstream "fetch" env REGION

upstream "github" {
  # servers "github" in testdata/vscode/.vscode/mcp.json
  url       = "https://api.githubcopilot.com/mcp/"
  transport = "streamable-http"
  namespace = "github"
  headers = {
    Authorization = "Bearer ${env("GITHUB_TOKEN")}"
  }
}

upstream "fetch" {
  # servers "fetch" in testdata/vscode/.vscode/mcp.json
  command = [
    "uvx",
    "mcp-server-fetch",
    "--root",
    "/home/me/project/docs",
    "--user-agent",
    "https://example.com/bot",
  ]
  namespace = "fetch"
  cwd       = "/home/me/project/tools"
  env = {
    REGION        = env("REGION", "eu-west-1")
    HOME_DIR      = env("HOME")
    SEP           = "/"
    FONT          = "$${config:editor.fontSize}"
    FETCH_TIMEOUT = "30"
    FETCH_SECRET  = env("FETCH_SECRET") # not copied: set FETCH_SECRET
  }
}

upstream "legacy" {
  # servers "legacy" in testdata/vscode/.vscode/mcp.json
  url       = "http://localhost:3001/sse"
  transport = "sse"
  namespace = "legacy"
}

# ---- warnings
# testdata/vscode/.vscode/mcp.json:14:5: warning: server "fetch": the 3 variables of its envFile /home/me/project/.env are copied as they are now (secrets as env() references); the file is not read again
# testdata/vscode/.vscode/mcp.json:14:5: warning: upstream "fetch" env FONT: ${config:editor.fontSize} is not a variable the proxy can substitute; it is kept as literal text
# testdata/vscode/.vscode/mcp.json:14:5: warning: server "fetch": ignoring dev, which the proxy has no use for
# ---- snippet for servers
# {
#   "servers": {
#     "mcp-proxy": {
#       "type": "stdio",
#       "command": "/usr/local/bin/mcp-proxy",
#       "args": [
#         "run",
#         "--config",
#         "/home/me/proxy.hcl"
#       ],
#       "env": {
#         "FETCH_SECRET": "${input:fetch-secret}",
#         "GITHUB_TOKEN": "${input:github-token}",
#         "REGION": "${input:region}"
#       }
#     }
#   },
#   "inputs": [
#     {
#       "type": "promptString",
#       "id": "fetch-secret",
#       "description": "FETCH_SECRET for mcp-proxy: upstream \"fetch\" env FETCH_SECRET",
#       "password": true
#     },
#     {
#       "type": "promptString",
#       "id": "github-token",
#       "description": "GitHub personal access token",
#       "password": true
#     },
#     {
#       "type": "promptString",
#       "id": "region",
#       "description": "Region",
#       "default": "eu-west-1"
#     }
#   ]
# }
