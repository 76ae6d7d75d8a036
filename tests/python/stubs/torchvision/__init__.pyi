from . import models as models
