"""The pexpect terminal driver, against a local shell (what `kubectl exec -it` gives)."""

import pytest

from gpushare_conformance.fixtures.framework.terminal import InteractiveShell, TerminalError, clean_tty_output


def test_command_output_without_echo_or_crlf():
    with InteractiveShell(["sh"], timeout=20) as shell:
        result = shell.run('printf "GPU 0\\nGPU 1\\n"')
    assert result.output == "GPU 0\nGPU 1"
    assert result.exit_status == 0


def test_exit_status_of_a_failing_command():
    with InteractiveShell(["sh"], timeout=20) as shell:
        assert shell.run("ls /nonexistent-dir").exit_status != 0
        assert shell.run("true").exit_status == 0


def test_works_with_an_interactive_bash_and_its_own_prompt():
    with InteractiveShell(["bash", "--norc", "-i"], timeout=20) as shell:
        assert shell.run("echo $((6*7))").output == "42"


def test_a_program_that_is_not_a_shell_gives_a_clear_error():
    with pytest.raises(TerminalError, match="terminal closed while waiting for the shell to start"):
        InteractiveShell(["sh", "-c", "echo no shell here"], timeout=10).open()


def test_a_hanging_command_times_out_with_what_it_showed():
    with InteractiveShell(["sh"], timeout=2) as shell:
        with pytest.raises(TerminalError, match="timed out after 2"):
            shell.run("echo partial; sleep 30")


def test_clean_tty_output():
    assert clean_tty_output("\x1b[1mGPU\x1b[0m 0\r\nline\r\n") == "GPU 0\nline\n"
    assert clean_tty_output("progress 10%\rprogress 100%\r\n") == "progress 100%\n"
