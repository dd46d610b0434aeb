"""A product's settings model as a resource: the Launchpad form of one run.

The fields are the core model's (one declaration: ``hypograph/<product>/settings.py``) with their
types but without their ranges, so any value of the right type reaches ``settings()``, which
validates it with the core model: a bad value is a ``SettingRefused`` of one line naming the field
by both its names (``graph_threshold (--threshold)``) and its range, which ends the first step that
reads it with no output and nothing red (``assets/errors.py: step``), instead of a resource that
cannot be built (a pydantic trace, then Dagster's). Types and choices Dagster checks itself, in the
Launchpad, before a run exists.
"""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import BaseModel, Field, ValidationError, create_model

from hypograph.errors import FLAGS, SettingRefused, both_names, settings_line


class SettingsResource(ConfigurableResource):
    """Base of the settings resources; ``settings()`` is the validated core model."""

    def settings(self) -> BaseModel:
        try:
            return self.MODEL.model_validate(self.model_dump())
        except ValidationError as e:
            raise SettingRefused(settings_line(self.MODEL, e, {f: both_names(f) for f in FLAGS})) from None


def settings_resource(model: type[BaseModel], doc: str) -> type[SettingsResource]:
    """A ``SettingsResource`` class with ``model``'s fields (defaults and descriptions kept)."""
    fields = {
        name: (field.annotation, Field(default=field.default, description=field.description))
        for name, field in model.model_fields.items()
    }
    resource = create_model(f"{model.__name__}Resource", __base__=SettingsResource, __doc__=doc, **fields)
    resource.MODEL = model
    return resource
