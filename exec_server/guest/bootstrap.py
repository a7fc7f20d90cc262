"""Installs the guest modules from ``argv[1]`` (JSON: name -> source) as the package
``boxed_guest`` and runs the configuration's ``program`` (``supervisor`` unless it says
``session``) with the configuration in ``argv[2]`` (JSON).

The sandbox image holds only an interpreter and packages; the guest programs come with each
container's command, so the host and the sandbox can never run different protocol versions.
"""

import json
import sys
import types

package = types.ModuleType("boxed_guest")
package.__path__ = []
sys.modules["boxed_guest"] = package
for name, source in json.loads(sys.argv[1]).items():
    module = types.ModuleType(f"boxed_guest.{name}")
    module.__package__ = "boxed_guest"
    sys.modules[module.__name__] = module
    exec(compile(source, f"<boxed_guest/{name}.py>", "exec"), module.__dict__)
    setattr(package, name, module)
del name, source, module
config = json.loads(sys.argv[2])
sys.modules["boxed_guest." + config.get("program", "supervisor")].main(config)
