"""The warm resident process and the hook client that reaches it: the wire protocol (wire), the
identity of the running code (code), the one dispatch that decides whether a hook event has work
(dispatch), the client the launchers run (client) and the process itself (daemon). Modules the
hook client loads before it knows it has work import only the standard library."""
