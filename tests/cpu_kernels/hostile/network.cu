// A kernel that connects to 127.0.0.1:PORT (-DPORT=...) and sends a line.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

__global__ void phone_home(int *done) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(PORT);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0)
        done[0] = write(s, "hello from a kernel\n", 20) == 20;
    close(s);
}
