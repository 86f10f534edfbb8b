"""brigade.Loader in a toy PyTorch training loop, checkpointed with the model."""

import io

import torch

from conftest import IMAGES, make_loader


def test_toy_training_loop_learns_and_resumes(images):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 8, stride=8), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = make_loader(images, batch_size=8, seed=1, layout="nchw", epochs=3)
    losses, seen = [], 0
    for epoch in range(3):
        loader.set_epoch(epoch)
        for batch in loader:
            x = batch["data"].float().div_(255)
            y = batch["ids"] % 2
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            seen += len(y)
            if epoch == 1 and len(losses) == 8:
                saved = io.BytesIO()
                torch.save({"model": model.state_dict(), "loader": loader.state_dict()}, saved)
    assert seen == 3 * IMAGES
    assert all(torch.isfinite(torch.tensor(losses)))
    saved.seek(0)
    restored = torch.load(saved)
    again = make_loader(images, batch_size=8, seed=1, layout="nchw", epochs=3)
    again.load_state_dict(restored["loader"])
    assert again.epoch == 1
    assert sum(len(b["ids"]) for b in again) == IMAGES - 2 * 8
