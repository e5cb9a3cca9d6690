"""The lab folders for the Python scripts, read from the one list every script uses: lab_folders in
scripts/driver/common.sh (labs/NN_topic/ in lab order)."""
import pathlib
import subprocess


def lab_folders(root):
    """labs/NN_topic/ folders under the checkout @p root, in lab order."""
    listed = subprocess.run(["bash", "-c", "source scripts/driver/common.sh && lab_folders"], cwd=root,
                            capture_output=True, text=True, check=True).stdout
    return [pathlib.Path(root) / line for line in listed.splitlines()]
