"""remoting."""
