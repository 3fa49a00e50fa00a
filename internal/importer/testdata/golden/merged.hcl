# mcp-proxy configuration written by `mcp-proxy import` from:
#   testdata/claude_desktop_config.json
#   testdata/vscode/.vscode/mcp.json
#
# Environment variables it reads (set them where mcp-proxy runs; the secrets of the
# imported files were not copied: give their values there):
#   BRAVE_API_KEY                        secret, not copied: upstream "brave-search" env BRAVE_API_KEY
#   FETCH_SECRET                         secret, not copied: upstream "fetch" env FETCH_SECRET
#   GITHUB_PERSONAL_ACCESS_TOKEN         secret, not copied: upstream "github" env GITHUB_PERSONAL_ACCESS_TOKEN
#   HOME                                 upstream "fetch" env HOME_DIR
#   REGION                               VS Code input "region" (Region), optional: upstream "fetch" env REGION
#   REMOTE_VIA_MCP_REMOTE_API_KEY        secret, not copied: upstream "remote-via-mcp-remote" argument 2
#   REMOTE_VIA_MCP_REMOTE_AUTHORIZATION  secret, not copied: upstream "remote-via-mcp-remote" argument 4

upstream "github" {
  # mcpServers "github" in testdata/claude_desktop_config.json
  command   = ["npx", "-y", "@modelcontextprotocol/server-github"]
  namespace = "github"
  env = {
    GITHUB_PERSONAL_ACCESS_TOKEN = env("GITHUB_PERSONAL_ACCESS_TOKEN") # not copied: set GITHUB_PERSONAL_ACCESS_TOKEN
    GITHUB_API_URL               = "https://api.github.com"
    MAX_TOKENS                   = "4096"
  }
}

upstream "filesystem" {
  # mcpServers "filesystem" in testdata/claude_desktop_config.json
  command = [
    "npx",
    "-y",
    "@modelcontextprotocol/server-filesystem",
    "/Users/me/Desktop",
    "/Users/me/Downloads",
  ]
  namespace = "filesystem"
}

upstream "brave-search" {
  # mcpServers "brave search" in testdata/claude_desktop_config.json
  command   = ["npx", "-y", "@modelcontextprotocol/server-brave-search"]
  namespace = "brave-search"
  env = {
    BRAVE_API_KEY = env("BRAVE_API_KEY") # not copied: set BRAVE_API_KEY
  }
}

upstream "remote-via-mcp-remote" {
  # mcpServers "remote-via-mcp-remote" in testdata/claude_desktop_config.json
  command = [
    "npx",
    "mcp-remote",
    "https://mcp.example.com/sse?api_key=${env("REMOTE_VIA_MCP_REMOTE_API_KEY")}",
    "--header",
    "Authorization: Bearer ${env("REMOTE_VIA_MCP_REMOTE_AUTHORIZATION")}",
  ]
  namespace = "remote-via-mcp-remote"
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
# testdata/claude_desktop_config.json:16:5: warning: server "brave search" becomes upstream "brave-search" (labels and namespaces take letters, digits, '_' and '-', and are unique)
# testdata/vscode/.vscode/mcp.json:8:5: warning: server "github" is also defined in testdata/claude_desktop_config.json; keeping that one
# testdata/vscode/.vscode/mcp.json:14:5: warning: server "fetch": the 3 variables of its envFile /home/me/project/.env are copied as they are now (secrets as env() references); the file is not read again
# testdata/vscode/.vscode/mcp.json:14:5: warning: upstream "fetch" env FONT: ${config:editor.fontSize} is not a variable the proxy can substitute; it is kept as literal text
# testdata/vscode/.vscode/mcp.json:14:5: warning: server "fetch": ignoring dev, which the proxy has no use for
# ---- snippet for mcpServers
# {
#   "mcpServers": {
#     "mcp-proxy": {
#       "command": "/usr/local/bin/mcp-proxy",
#       "args": [
#         "run",
#         "--config",
#         "/home/me/proxy.hcl"
#       ],
#       "env": {
#         "BRAVE_API_KEY": "<the value of BRAVE_API_KEY from your old entries>",
#         "FETCH_SECRET": "<the value of FETCH_SECRET from your old entries>",
#         "GITHUB_PERSONAL_ACCESS_TOKEN": "<the value of GITHUB_PERSONAL_ACCESS_TOKEN from your old entries>",
#         "REMOTE_VIA_MCP_REMOTE_API_KEY": "<the value of REMOTE_VIA_MCP_REMOTE_API_KEY from your old entries>",
#         "REMOTE_VIA_MCP_REMOTE_AUTHORIZATION": "<the value of REMOTE_VIA_MCP_REMOTE_AUTHORIZATION from your old entries>"
#       }
#     }
#   }
# }
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
#         "BRAVE_API_KEY": "${input:brave-api-key}",
#         "FETCH_SECRET": "${input:fetch-secret}",
#         "GITHUB_PERSONAL_ACCESS_TOKEN": "${input:github-personal-access-token}",
#         "REGION": "${input:region}",
#         "REMOTE_VIA_MCP_REMOTE_API_KEY": "${input:remote-via-mcp-remote-api-key}",
#         "REMOTE_VIA_MCP_REMOTE_AUTHORIZATION": "${input:remote-via-mcp-remote-authorization}"
#       }
#     }
#   },
#   "inputs": [
#     {
#       "type": "promptString",
#       "id": "brave-api-key",
#       "description": "BRAVE_API_KEY for mcp-proxy: upstream \"brave-search\" env BRAVE_API_KEY",
#       "password": true
#     },
#     {
#       "type": "promptString",
#       "id": "fetch-secret",
#       "description": "FETCH_SECRET for mcp-proxy: upstream \"fetch\" env FETCH_SECRET",
#       "password": true
#     },
#     {
#       "type": "promptString",
#       "id": "github-personal-access-token",
#       "description": "GITHUB_PERSONAL_ACCESS_TOKEN for mcp-proxy: upstream \"github\" env GITHUB_PERSONAL_ACCESS_TOKEN",
#       "password": true
#     },
#     {
#       "type": "promptString",
#       "id": "region",
#       "description": "Region",
#       "default": "eu-west-1"
#     },
#     {
#       "type": "promptString",
#       "id": "remote-via-mcp-remote-api-key",
#       "description": "REMOTE_VIA_MCP_REMOTE_API_KEY for mcp-proxy: upstream \"remote-via-mcp-remote\" argument 2",
#       "password": true
#     },
#     {
#       "type": "promptString",
#       "id": "remote-via-mcp-remote-authorization",
#       "description": "REMOTE_VIA_MCP_REMOTE_AUTHORIZATION for mcp-proxy: upstream \"remote-via-mcp-remote\" argument 4",
#       "password": true
#     }
#   ]
# }
