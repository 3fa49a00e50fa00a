# mcp-proxy configuration written by `mcp-proxy import` from:
#   testdata/claude-code/.mcp.json
#
# Environment variables it reads (set them where mcp-proxy runs; the secrets of the
# imported files were not copied: give their values there):
#   API_BASE_URL    optional: upstream "api" url
#   API_X_API_KEY   secret, not copied: upstream "api" header X-API-Key
#   EVENTS_TOKEN    upstream "events" header Authorization
#   OPENAI_API_KEY  upstream "local" env OPENAI_API_KEY
#   TAG             upstream "local" argument 6
#   TEAM            optional: upstream "api" header X-Team

upstream "api" {
  # mcpServers "api" in testdata/claude-code/.mcp.json
  url       = "${env("API_BASE_URL", "https://api.example.com")}/mcp"
  transport = "streamable-http"
  namespace = "api"
  headers = {
    X-API-Key = env("API_X_API_KEY") # not copied: set API_X_API_KEY
    X-Team    = env("TEAM", "platform")
  }
}

upstream "events" {
  # mcpServers "events" in testdata/claude-code/.mcp.json
  url       = "https://events.example.com/sse"
  transport = "sse"
  namespace = "events"
  headers = {
    Authorization = "Bearer ${env("EVENTS_TOKEN")}"
  }
}

upstream "local" {
  # mcpServers "local" in testdata/claude-code/.mcp.json
  command   = ["python", "-m", "local_server", "--price", "$5", "--tag", env("TAG")]
  namespace = "local"
  cwd       = "/home/me/project"
  env = {
    OPENAI_API_KEY = env("OPENAI_API_KEY")
    MODEL          = "gpt-4o-mini-2024-07-18"
    GREETING       = "say \"hi\"\n"
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
#         "API_X_API_KEY": "<the value of API_X_API_KEY from your old entries>"
#       }
#     }
#   }
# }
