"""Triton adapter for an image classifier's `NAME_pixels` (kit.control.image_task), installed as its model.py by the
repository builder: each request's encoded image decoded and preprocessed as the checkpoint's processor does
(kit.pipelines.image_processing), so that images of any size leave it at the graph's one size and the classifier's
batcher merges them. A request whose image is bad fails alone (INVALID_ARG); the others of its batch are answered."""

import numpy as np

from kit.adapters.settings import ImageClassifierSettings
from kit.adapters.triton import Replies, input_array
from kit.pipelines.image_processing import Preprocessing, decode_request_image


class TritonPythonModel:
    def initialize(self, args):
        self.settings, version_dir = ImageClassifierSettings.from_args(args)
        self.entry = self.settings.parameters_from or args["model_name"]  # the model its clients call
        self.preprocess = Preprocessing.load(version_dir / self.settings.preprocessing)

    def pixels(self, request) -> np.ndarray:
        """Each row's image of the request (a client may send several), at the graph's size; one bad row fails the
        request."""
        limits = self.settings.max_image_bytes, self.settings.max_pixels
        return np.stack([self.preprocess(decode_request_image(row, *limits)) for row in input_array(request, "IMAGE")])

    def execute(self, requests):
        replies = Replies(requests, self.entry)
        try:
            kept, pixels = replies.checked(self.pixels, requests)
            for index, values in zip(kept, pixels):
                replies.answer(index, {"PIXELS": values})
        except Exception as exc:  # a bug fails the batch's unanswered images, not the stub
            replies.close(exc)
        return None
