"""The human views of the commands, one module per kind of command; the registry names each
command's view (:attr:`watcher.commands.spec.Command.view`) and the renderer imports it on first
use.
"""
