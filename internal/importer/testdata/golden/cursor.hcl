# mcp-proxy configuration written by `mcp-proxy import` from:
#   testdata/cursor/.cursor/mcp.json
#
# Environment variables it reads (set them where mcp-proxy runs; the secrets of the
# imported files were not copied: give their values there):
#   API_PASSWORD          secret, not copied: upstream "docker" env API_PASSWORD
#   DB_URL                secret, not copied: upstream "docker" env DB_URL
#   DOCKER_API_KEY        secret, not copied: upstream "docker" argument 8
#   DOCKER_TOKEN          secret, not copied: upstream "docker" argument 9
#   LINEAR_AUTHORIZATION  secret, not copied: upstream "linear" header Authorization
#   NOTES_API_TOKEN       upstream "notes" env NOTES_API_TOKEN
#   SEARCH_APIKEY         secret, not copied: upstream "search" url

upstream "notes" {
  # mcpServers "notes" in testdata/cursor/.cursor/mcp.json
  command   = ["node", "/home/me/project/servers/notes.js", "--data", "${env("HOME")}/notes"]
  namespace = "notes"
  cwd       = "/home/me/project"
  env = {
    NOTES_API_TOKEN = env("NOTES_API_TOKEN")
    LOG_LEVEL       = "debug"
  }
}

upstream "linear" {
  # mcpServers "linear" in testdata/cursor/.cursor/mcp.json
  url       = "https://mcp.linear.app/sse"
  namespace = "linear"
  headers = {
    Authorization = "Bearer ${env("LINEAR_AUTHORIZATION")}" # not copied: set LINEAR_AUTHORIZATION
  }
}

upstream "search" {
  # mcpServers "search" in testdata/cursor/.cursor/mcp.json
  url       = "https://search.example.com/mcp?apiKey=${env("SEARCH_APIKEY")}&region=eu"
  namespace = "search"
  disabled  = true
}

upstream "docker" {
  # mcpServers "docker" in testdata/cursor/.cursor/mcp.json
  command = [
    "docker",
    "run",
    "-i",
    "--rm",
    "-e",
    "API_PASSWORD",
    "mcp/tool",
    "--api-key",
    env("DOCKER_API_KEY"),
    "--token=${env("DOCKER_TOKEN")}",
  ]
  namespace = "docker"
  cwd       = "/home/me/project"
  env = {
    API_PASSWORD = env("API_PASSWORD") # not copied: set API_PASSWORD
    DB_URL       = env("DB_URL")       # not copied: set DB_URL
  }
}

# ---- warnings
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
#         "API_PASSWORD": "<the value of API_PASSWORD from your old entries>",
#         "DB_URL": "<the value of DB_URL from your old entries>",
#         "DOCKER_API_KEY": "<the value of DOCKER_API_KEY from your old entries>",
#         "DOCKER_TOKEN": "<the value of DOCKER_TOKEN from your old entries>",
#         "LINEAR_AUTHORIZATION": "<the value of LINEAR_AUTHORIZATION from your old entries>",
#         "SEARCH_APIKEY": "<the value of SEARCH_APIKEY from your old entries>"
#       }
#     }
#   }
# }
