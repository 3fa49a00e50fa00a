# mcp-proxy configuration written by `mcp-proxy import` from:
#   testdata/claude_desktop_config.json
#
# Environment variables it reads (set them where mcp-proxy runs; the secrets of the
# imported files were not copied: give their values there):
#   BRAVE_API_KEY                        secret, not copied: upstream "brave-search" env BRAVE_API_KEY
#   GITHUB_PERSONAL_ACCESS_TOKEN         secret, not copied: upstream "github" env GITHUB_PERSONAL_ACCESS_TOKEN
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

# ---- warnings
# testdata/claude_desktop_config.json:16:5: warning: server "brave search" becomes upstream "brave-search" (labels and namespaces take letters, digits, '_' and '-', and are unique)
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
#         "GITHUB_PERSONAL_ACCESS_TOKEN": "<the value of GITHUB_PERSONAL_ACCESS_TOKEN from your old entries>",
#         "REMOTE_VIA_MCP_REMOTE_API_KEY": "<the value of REMOTE_VIA_MCP_REMOTE_API_KEY from your old entries>",
#         "REMOTE_VIA_MCP_REMOTE_AUTHORIZATION": "<the value of REMOTE_VIA_MCP_REMOTE_AUTHORIZATION from your old entries>"
#       }
#     }
#   }
# }
