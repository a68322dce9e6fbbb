"""A griffe extension for the API reference: a module shows the names its ``__all__`` lists
(the op functions exist only at run time, so the reference is made by importing the
package, which also sees every name a module imports), and a class shows no dunder
attributes."""

import griffe


class PublicNames(griffe.Extension):
    """Drop the members a module does not export, and classes' dunder attributes."""

    def on_package(self, *, pkg, **kwargs):
        self._prune(pkg)

    def _prune(self, obj):
        exports = obj.exports if obj.is_module else None
        for name, member in list(obj.members.items()):
            if member.is_alias:  # (an imported name: not resolved, it may point outside)
                if exports is not None and name not in exports:
                    del obj.members[name]
                continue
            if exports is not None and name not in exports and not member.is_module:
                del obj.members[name]
            elif obj.is_class and name.startswith("__") and member.is_attribute:
                del obj.members[name]
            elif member.is_module or member.is_class:
                self._prune(member)
